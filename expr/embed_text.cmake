# cmake -DINPUT=ops.h -DOUTPUT=ops_text.inc -P embed_text.cmake
# Writes INPUT's text as one C++ raw string literal, for `#include` inside an initializer.
file(READ "${INPUT}" text)
file(WRITE "${OUTPUT}.tmp" "R\"orch_text(${text})orch_text\"\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
