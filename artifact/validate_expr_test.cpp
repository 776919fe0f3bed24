// validate()'s rules for expressions (validate_expr.cpp); see validate_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

TEST_CASE("validate: expressions") {
  auto count = [](std::vector<fb::ExprInstr> code) {
    return [code](fb::PipelineT& t) { t.buffers[0]->count->code = code; };
  };
  std::vector<fb::ExprInstr> longest, too_long;
  for (int i = 0; i < 2048; ++i) longest.push_back(lit(i));
  for (int i = 0; i < 2047; ++i) longest.push_back(op(Op::Add));
  too_long = longest;
  too_long.push_back(lit(1));
  too_long.push_back(op(Op::Add));
  REQUIRE(longest.size() == kMaxExprLength - 1);
  REQUIRE(too_long.size() == kMaxExprLength + 1);
  run({
      {"empty", count({}), "buffer 'u' count: expression has no instructions"},
      {"underflow binary", count({par(0), op(Op::Add)}),
       "buffer 'u' count: expression instruction 1 (Add) needs 2 operands, the stack holds 1"},
      {"underflow unary", count({op(Op::Neg)}),
       "buffer 'u' count: expression instruction 0 (Neg) needs 1 operand, the stack holds 0"},
      {"underflow call", count({lit(1), op(Op::CeilDiv)}),
       "buffer 'u' count: expression instruction 1 (CeilDiv) needs 2 operands, the stack holds 1"},
      {"param ref high", count({par(3)}),
       "buffer 'u' count: expression instruction 0 refers to param 3, but the pipeline has 3 "
       "params"},
      {"param ref negative", count({par(-1)}),
       "buffer 'u' count: expression instruction 0 refers to param -1, but the pipeline has 3 "
       "params"},
      {"two values left", count({lit(1), lit(2)}),
       "buffer 'u' count: expression leaves 2 values on the stack instead of 1"},
      {"unknown op", count({fb::ExprInstr(Op(200), U32, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 has unknown op 200"},
      {"longest accepted", count(longest), ""},
      {"too long", count(too_long),
       "buffer 'u' count: expression has 4097 instructions, more than the limit of 4096"},
      {"unknown type", count({fb::ExprInstr(Op::ConstInt, fb::ScalarType(13), 0, 1, 0)}),
       "buffer 'u' count: expression instruction 0 has unknown type 13"},
      {"param read as another type", count({fb::ExprInstr(Op::Param, I64, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 reads param 0 as I64, but it is U32"},
      {"rank not u32", count({fb::ExprInstr(Op::Rank, I64, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 (Rank) must be U32"},
      {"operator type against the rules", count({par(0), lit(2), op(Op::Mul, I64)}),
       "buffer 'u' count: expression instruction 2 (Mul) has type i64, but its operands give u32"},
      {"float operand of %", count({par(1), lit(2), op(Op::Mod, F32)}),
       "buffer 'u' count: expression instruction 2 (Mod): `%` needs integer operands"},
      {"constant out of its type", count({lit(-1)}),
       "buffer 'u' count: expression instruction 0 (Const) is not a value of u32"},
      {"float constant not of its type", count({fb::ExprInstr(Op::ConstFloat, F32, 0, 0, 0.1)}),
       "buffer 'u' count: expression instruction 0 (Const) is not a value of f32"},
      {"every op accepted", count({lit(1),      fb::ExprInstr(Op::FamilyIndex, U32, 0, 0, 0),
                                   op(Op::Add), fb::ExprInstr(Op::Rank, U32, 0, 0, 0),
                                   op(Op::Sub), fb::ExprInstr(Op::WorldSize, U32, 0, 0, 0),
                                   op(Op::Mul), lit(3),
                                   op(Op::Div), lit(3),
                                   op(Op::Mod), op(Op::Neg),
                                   op(Op::BitNot),
                                   lit(1),      op(Op::Shl),
                                   lit(1),      op(Op::Shr),
                                   fb::ExprInstr(Op::ConstFloat, F32, 0, 0, 2.5), op(Op::Add, F32),
                                   lit(1),      op(Op::Lt, Bool),
                                   lit(1),      op(Op::Le, Bool),
                                   lit(1),      op(Op::Gt, Bool),
                                   lit(1),      op(Op::Ge, Bool),
                                   lit(1),      op(Op::Eq, Bool),
                                   lit(1),      op(Op::Ne, Bool),
                                   lit(1),      op(Op::BitAnd, I64),
                                   lit(1),      op(Op::BitXor, I64),
                                   lit(1),      op(Op::BitOr, I64),
                                   lit(1),      op(Op::And, Bool),
                                   lit(1),      op(Op::Or, Bool),
                                   op(Op::Not, Bool),
                                   lit(1),      op(Op::Min, I64),
                                   lit(1),      op(Op::Max, I64),
                                   lit(1),      op(Op::CeilDiv, I64)}),
       ""},
      {"bind check condition",
       [](fb::PipelineT& t) { t.bind_checks[0]->condition->code = {op(Op::Eq)}; },
       "bind check 0 (E0410) condition: expression instruction 0 (Eq) needs 2 operands, the "
       "stack holds 0"},
  });
}
