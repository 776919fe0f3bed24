#!/usr/bin/env python3
"""Packs the VS Code extension into a .vsix without vsce or npm (the extension has no
dependencies, so the package is its files, a manifest and a content-types list in a zip).

  package_vsix.py OUT.vsix          build it (byte-for-byte the same for the same sources)
  package_vsix.py --check OUT.vsix  check one: its manifest, and every file package.json names
"""
import json
import pathlib
import sys
import zipfile
from xml.sax.saxutils import escape

HERE = pathlib.Path(__file__).resolve().parent
FILES = ["package.json", "extension.js", "lsp_connection.js", "language-configuration.json",
         "syntaxes/orch.tmLanguage.json", "README.md"]


def manifest(pkg):
    return f"""<?xml version="1.0" encoding="utf-8"?>
<PackageManifest Version="2.0.0" xmlns="http://schemas.microsoft.com/developer/vsx-schema/2011" xmlns:d="http://schemas.microsoft.com/developer/vsx-schema-design/2011">
  <Metadata>
    <Identity Language="en-US" Id="{escape(pkg['name'])}" Version="{escape(pkg['version'])}" Publisher="{escape(pkg['publisher'])}" />
    <DisplayName>{escape(pkg['displayName'])}</DisplayName>
    <Description xml:space="preserve">{escape(pkg['description'])}</Description>
    <Tags>orch,cuda,lsp</Tags>
    <Categories>{escape(','.join(pkg['categories']))}</Categories>
    <GalleryFlags>Public</GalleryFlags>
    <Properties>
      <Property Id="Microsoft.VisualStudio.Code.Engine" Value="{escape(pkg['engines']['vscode'])}" />
      <Property Id="Microsoft.VisualStudio.Code.ExtensionDependencies" Value="" />
      <Property Id="Microsoft.VisualStudio.Code.ExtensionPack" Value="" />
      <Property Id="Microsoft.VisualStudio.Code.ExtensionKind" Value="workspace" />
      <Property Id="Microsoft.VisualStudio.Code.LocalizedLanguages" Value="" />
    </Properties>
  </Metadata>
  <Installation>
    <InstallationTarget Id="Microsoft.VisualStudio.Code" />
  </Installation>
  <Dependencies />
  <Assets>
    <Asset Type="Microsoft.VisualStudio.Code.Manifest" Path="extension/package.json" Addressable="true" />
    <Asset Type="Microsoft.VisualStudio.Services.Content.Details" Path="extension/README.md" Addressable="true" />
  </Assets>
</PackageManifest>
"""


CONTENT_TYPES = """<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension=".json" ContentType="application/json" /><Default Extension=".js" ContentType="application/javascript" /><Default Extension=".md" ContentType="text/markdown" /><Default Extension=".vsixmanifest" ContentType="text/xml" /></Types>
"""


def build(out):
    pkg = json.loads((HERE / "package.json").read_text())
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name, data):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
        add("[Content_Types].xml", CONTENT_TYPES)
        add("extension.vsixmanifest", manifest(pkg))
        for f in FILES:
            add("extension/" + f, (HERE / f).read_bytes())
    tmp.replace(out)


def check(path):
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        assert {"[Content_Types].xml", "extension.vsixmanifest", "extension/package.json"} <= names, names
        pkg = json.loads(z.read("extension/package.json"))
        wanted = {"extension/" + pkg["main"].lstrip("./")}
        for lang in pkg["contributes"]["languages"]:
            wanted.add("extension/" + lang["configuration"].lstrip("./"))
        for g in pkg["contributes"]["grammars"]:
            wanted.add("extension/" + g["path"].lstrip("./"))
            json.loads(z.read("extension/" + g["path"].lstrip("./")))
        missing = wanted - names
        assert not missing, f"files package.json names are not in the package: {missing}"
        m = z.read("extension.vsixmanifest").decode()
        assert f'Version="{pkg["version"]}"' in m and "Microsoft.VisualStudio.Code.Manifest" in m
        # The client needs nothing outside the package: every require() is Node's or a packed file.
        for js in (n for n in names if n.endswith(".js")):
            for line in z.read(js).decode().splitlines():
                if "require(" in line:
                    mod = line.split("require(")[1].split(")")[0].strip("'\"")
                    assert mod in ("vscode", "child_process") or ("extension/" + mod.lstrip("./") + ".js") in names, (js, mod)
    print(f"ok: {path}: {len(names)} files, manifest and package.json agree, no dependency outside it")


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        build(sys.argv[1])
