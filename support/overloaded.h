// A set of lambdas as one visitor, for std::visit over a variant of kinds (ast::Stmt's node,
// lir::NodeOp): a kind the set does not handle is a compile error, which is the point.
//   std::visit(overloaded{[](const ast::Copy&) {...}, [](const ast::Fill&) {...}, ...}, s.node)
#pragma once

namespace orch {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

}  // namespace orch
