// A JSON Schema (draft-07) validator for the keywords tools/tests/trace_schema.json uses: type,
// required, properties, additionalProperties (boolean), items, enum, const, minimum, minLength,
// allOf, if/then, and local $ref ("#/definitions/..."). Anything else in a schema is an error, so
// a schema cannot silently ask for more than is checked. Returns "" or the first violation with
// its JSON pointer.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace orch::tools_test {

class JsonSchema {
 public:
  explicit JsonSchema(nlohmann::json schema) : root_(std::move(schema)) {}

  std::string validate(const nlohmann::json& doc) const { return check(root_, doc, ""); }

 private:
  static bool type_is(const std::string& t, const nlohmann::json& v) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  std::string check(const nlohmann::json& s, const nlohmann::json& v, const std::string& at) const {
    static const std::set<std::string> known = {"$schema", "$id", "title", "description", "type", "required",
                                                "properties", "additionalProperties", "items", "enum", "const",
                                                "minimum", "minLength", "allOf", "if", "then", "$ref", "definitions"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!known.count(it.key())) return "schema keyword '" + it.key() + "' is not supported by this validator";
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      const std::string prefix = "#/definitions/";
      if (ref.rfind(prefix, 0) != 0 || !root_.contains("definitions") || !root_["definitions"].contains(ref.substr(prefix.size())))
        return "unresolved $ref " + ref;
      std::string e = check(root_["definitions"][ref.substr(prefix.size())], v, at);
      if (!e.empty()) return e;
    }
    if (s.contains("type") && !type_is(s["type"], v)) return at + ": not of type " + s["type"].get<std::string>();
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found |= e == v;
      if (!found) return at + ": " + v.dump() + " is not one of " + s["enum"].dump();
    }
    if (s.contains("const") && s["const"] != v) return at + ": " + v.dump() + " is not " + s["const"].dump();
    if (s.contains("minimum") && v.is_number() && v.get<double>() < s["minimum"].get<double>())
      return at + ": " + v.dump() + " is below " + s["minimum"].dump();
    if (s.contains("minLength") && v.is_string() && v.get<std::string>().size() < s["minLength"].get<size_t>())
      return at + ": shorter than " + s["minLength"].dump();
    if (v.is_object()) {
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!v.contains(r.get<std::string>())) return at + ": lacks required '" + r.get<std::string>() + "'";
      if (s.contains("properties"))
        for (auto it = v.begin(); it != v.end(); ++it) {
          if (s["properties"].contains(it.key())) {
            std::string e = check(s["properties"][it.key()], it.value(), at + "/" + it.key());
            if (!e.empty()) return e;
          } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
            return at + ": property '" + it.key() + "' is not allowed";
          }
        }
    }
    if (v.is_array() && s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) {
        std::string e = check(s["items"], v[i], at + "/" + std::to_string(i));
        if (!e.empty()) return e;
      }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"]) {
        std::string e = check(sub, v, at);
        if (!e.empty()) return e;
      }
    if (s.contains("if") && check(s["if"], v, at).empty() && s.contains("then")) {
      std::string e = check(s["then"], v, at);
      if (!e.empty()) return e;
    }
    return "";
  }

  nlohmann::json root_;
};

}  // namespace orch::tools_test
