// The reverse-mode transform: forward nodes are kept, cotangents are propagated from the
// outputs back to the inputs in reverse node order with the registry's rules.
#include "tlaloc/autodiff/autodiff.h"

#include <fmt/format.h>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/passes.h"

namespace tlaloc::autodiff {
namespace {

using detail::Grads;
using detail::RuleCtx;
using ir::Op;
using ir::ValueId;

void check_wrt(const ir::Function& f, const std::vector<int>& wrt, const char* what) {
  for (int w : wrt)
    if (w < 0 || w >= f.num_inputs())
      fail("autodiff::{}: wrt index {} out of range for function {} with {} inputs", what, w,
           f.name, f.num_inputs());
}

// Appends the backward pass to b (which holds f's nodes): seeds[k] is the cotangent of output k
// (-1: none). Returns the cotangent of each wrt input (zeros where none flows).
std::vector<ValueId> backward(ir::Builder& b, const ir::Function& f, const std::vector<int>& wrt,
                              const std::vector<ValueId>& seeds) {
  const size_t n = f.nodes.size();
  // Active values: floating, reached from a wrt input through ops that have a rule.
  std::vector<char> active(n, 0);
  for (int w : wrt)
    if (is_floating(f.input_type(w).dtype)) active[size_t(f.inputs[size_t(w)])] = 1;
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& nd = f.nodes[i];
    if (nd.op == Op::result) {  // one result of a composite: active with it
      active[i] = active[size_t(nd.operands[0])] && is_floating(nd.type.dtype);
      continue;
    }
    // select_and_scatter is linear in its source, but that VJP (select-and-gather) is not
    // implemented: refuse rather than let the source's cotangent be zero.
    if (nd.op == Op::select_and_scatter && active[size_t(nd.operands[1])])
      fail(
          "autodiff: no VJP of select_and_scatter in its source (second derivatives through "
          "max / min pooling are not supported)");
    // all_gather's transpose is a reduce_scatter and all_reduce max / min's a scatter of the
    // cotangent to the replica that held the extremum: neither exists here.
    if (nd.op == Op::all_gather && active[size_t(nd.operands[0])])
      fail(
          "autodiff: no VJP of all_gather (its transpose is a reduce_scatter, which tlaloc does "
          "not have): gather parameters outside the differentiated function");
    if (nd.op == Op::all_reduce && nd.attrs.reduce_kind != ir::ReduceKind::sum &&
        active[size_t(nd.operands[0])])
      fail("autodiff: no VJP of all_reduce {} (only sum)", ir::name(nd.attrs.reduce_kind));
    if (nd.op == Op::parameter || !is_floating(nd.type.dtype) || !detail::vjp_rule(nd.op)) continue;
    for (ValueId o : nd.operands) active[i] = active[i] || active[size_t(o)];
  }
  std::vector<ValueId> ct(n, -1);
  auto accumulate = [&](ValueId v, ValueId g, const char* from) {
    if (b.type(g) != f.type(v))
      fail("autodiff: the {} rule gave a {} cotangent for %{} of type {}", from,
           ir::to_string(b.type(g)), v, ir::to_string(f.type(v)));
    ct[size_t(v)] = ct[size_t(v)] < 0 ? g : b.binary(Op::add, ct[size_t(v)], g);
  };
  for (size_t k = 0; k < seeds.size(); ++k)
    if (seeds[k] >= 0 && active[size_t(f.results[k])]) accumulate(f.results[k], seeds[k], "seed");
  for (size_t i = n; i-- > 0;) {
    const ir::Node& nd = f.nodes[i];
    // A result node's cotangent stays in ct until its composite (visited next) gathers it.
    if (!active[i] || nd.op == Op::parameter || nd.op == Op::result) continue;
    std::vector<ValueId> outs = ir::results_of(f, ValueId(i)), cts;
    bool any = false;
    for (ValueId r : outs) {
      cts.push_back(ct[size_t(r)]);
      any = any || cts.back() >= 0;
    }
    if (!any) continue;
    RuleCtx c{b, nd, outs[0], cts[0], {}, std::move(outs), std::move(cts)};
    for (ValueId o : nd.operands) c.need.push_back(active[size_t(o)]);
    Grads g = detail::vjp_rule(nd.op)(c);
    if (g.size() != nd.operands.size())
      fail("autodiff: the {} rule returned {} cotangents for {} operands", ir::op_name(nd.op),
           g.size(), nd.operands.size());
    for (size_t k = 0; k < g.size(); ++k)
      if (g[k] >= 0 && c.need[k]) accumulate(nd.operands[k], g[k], ir::op_name(nd.op).data());
  }
  std::vector<ValueId> out;
  for (int w : wrt) {
    ValueId v = f.inputs[size_t(w)];
    if (ct[size_t(v)] >= 0) {
      out.push_back(ct[size_t(v)]);
    } else {
      const ir::TensorType& t = f.type(v);
      ValueId z = b.scalar(t.dtype, 0);
      out.push_back(t.shape.rank() == 0 ? z : b.broadcast_in_dim(z, t.shape, {}));
    }
  }
  return out;
}

ir::Builder start(const ir::Function& f, const char* suffix) {
  ir::verify(f);
  ir::Function g = f;
  g.name = f.name + suffix;
  g.results.clear();
  g.output_names.clear();
  g.aliases.clear();
  return ir::Builder(std::move(g));
}

std::string input_label(const ir::Function& f, int i) {
  if (size_t(i) < f.input_names.size() && !f.input_names[size_t(i)].empty())
    return f.input_names[size_t(i)];
  return std::to_string(i);
}

bool has_names(const ir::Function& f) { return !f.input_names.empty() || !f.output_names.empty(); }

ir::Function finish(ir::Builder& b, std::vector<ValueId> results, std::vector<std::string> names) {
  bool named = false;
  for (auto& s : names) named = named || !s.empty();
  return passes::dce(
      b.build(std::move(results), named ? std::move(names) : std::vector<std::string>{}));
}

// grad / value_and_grad: seed output 0 with 1.
ir::Function grad_impl(const ir::Function& f, const std::vector<int>& wrt, bool with_value) {
  const char* what = with_value ? "value_and_grad" : "grad";
  check_wrt(f, wrt, what);
  if (f.num_outputs() < 1) fail("autodiff::{}: function {} has no outputs", what, f.name);
  const ir::TensorType& t0 = f.output_type(0);
  if (!is_floating(t0.dtype) || t0.shape.rank() != 0)
    fail("autodiff::{}: output 0 of {} must be a floating scalar, got {}", what, f.name,
         ir::to_string(t0));
  ir::Builder b = start(f, with_value ? "_value_and_grad" : "_grad");
  trace::BuilderScope scope(b);
  std::vector<ValueId> seeds(size_t(f.num_outputs()), -1);
  seeds[0] = b.scalar(t0.dtype, 1.0);
  std::vector<ValueId> grads = backward(b, f, wrt, seeds);
  std::vector<ValueId> results;
  std::vector<std::string> names;
  if (with_value) {
    results = f.results;
    for (int k = 0; k < f.num_outputs(); ++k)
      names.push_back(size_t(k) < f.output_names.size() ? f.output_names[size_t(k)] : "");
  }
  results.insert(results.end(), grads.begin(), grads.end());
  for (int w : wrt) names.push_back(f.input_names.empty() ? "" : "grad." + input_label(f, w));
  return finish(b, std::move(results), std::move(names));
}

}  // namespace

ir::Function vjp(const ir::Function& f, std::vector<int> wrt) {
  check_wrt(f, wrt, "vjp");
  ir::Builder b = start(f, "_vjp");
  trace::BuilderScope scope(b);
  std::vector<ValueId> seeds;
  for (int k = 0; k < f.num_outputs(); ++k) {
    std::string name;
    if (has_names(f))
      name = "ct." + (size_t(k) < f.output_names.size() && !f.output_names[size_t(k)].empty()
                          ? f.output_names[size_t(k)]
                          : std::to_string(k));
    seeds.push_back(b.parameter(f.output_type(k), name));
  }
  std::vector<ValueId> grads = backward(b, f, wrt, seeds);
  std::vector<std::string> names;
  for (int w : wrt) names.push_back(f.input_names.empty() ? "" : "grad." + input_label(f, w));
  return finish(b, std::move(grads), std::move(names));
}

ir::Function grad(const ir::Function& f, std::vector<int> wrt) { return grad_impl(f, wrt, false); }

ir::Function value_and_grad(const ir::Function& f, std::vector<int> wrt) {
  return grad_impl(f, wrt, true);
}

}  // namespace tlaloc::autodiff
