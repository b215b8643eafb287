#include "tlaloc/optim/update.h"

#include <cmath>

#include "tlaloc/ir/builder.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {

using trace::Tensor;

namespace {

// select(pred, on_true, on_false) with a scalar i1 predicate kept scalar (StableHLO allows it).
Tensor select_scalar(const Tensor& pred, const Tensor& on_true, const Tensor& on_false) {
  ir::Builder& b = on_true.builder();
  return {&b, b.select(pred.id(), on_true.id(), on_false.id())};
}

struct Group {
  Tensor lr;  // f64 scalar input
  double wd;
};

// One parameter's update. g: the raw gradient in the master dtype; scale: the f64 scalar that
// unscales and clips it (the gradient the formulas see is g·scale). Per-element work is kept
// small by folding scalars together: Adam's m and v take g with the scale folded into their
// coefficients, and the bias corrections enter as α = lr·√(1−β2^t)/(1−β1^t) and
// ε̂ = eps·√(1−β2^t) (Kingma & Ba 2015, end of section 2), so p' = p − α·m / (√v + ε̂).
// Returns p' and writes the new state tensors into st (indexed like the layout).
Tensor update_param(const Optimizer& opt, const Group& grp, const Tensor& step, const Tensor& t64,
                    Tensor p, const Tensor& g, const Tensor& scale, const StateLayout& layout,
                    int i, std::vector<Tensor>& st) {
  const DType dt = p.dtype();
  auto slot = [&](StateKind k) { return layout.find(i, k); };
  if (const SGD* o = std::get_if<SGD>(&opt)) {
    Tensor d = g * astype(o->maximize ? -scale : scale, dt);
    if (grp.wd != 0) d = d + p * grp.wd;
    if (o->momentum != 0) {
      int s = slot(StateKind::momentum_buffer);
      Tensor damped = o->dampening == 0 ? d : d * (1 - o->dampening);
      Tensor first = equal(step, trace::scalar(0, DType::s32));
      Tensor buf = select_scalar(first, d, st[size_t(s)] * o->momentum + damped);
      st[size_t(s)] = buf;
      d = o->nesterov ? d + buf * o->momentum : buf;
    }
    return p - d * astype(grp.lr, dt);
  }
  const bool decoupled = std::holds_alternative<AdamW>(opt);
  std::visit(
      [&](const auto& o) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(o)>, SGD>) {
          const double b1 = o.betas[0], b2 = o.betas[1];
          Tensor bc1 = 1.0 - pow(trace::scalar(b1, DType::f64), t64);
          Tensor bc2_sqrt = sqrt(1.0 - pow(trace::scalar(b2, DType::f64), t64));
          Tensor alpha = astype(grp.lr * bc2_sqrt / bc1, dt);
          Tensor eps_hat = astype(o.eps * bc2_sqrt, dt);
          Tensor s = o.maximize ? -scale : scale;
          int sm = slot(StateKind::exp_avg), sv = slot(StateKind::exp_avg_sq);
          Tensor m, v;
          if (grp.wd != 0 && !decoupled) {  // L2: the gradient itself is needed
            Tensor gl = g * astype(s, dt) + p * grp.wd;
            m = st[size_t(sm)] * b1 + gl * (1 - b1);
            v = st[size_t(sv)] * b2 + gl * gl * (1 - b2);
          } else {
            m = st[size_t(sm)] * b1 + g * astype(s * (1 - b1), dt);
            Tensor gc = g * astype(s * std::sqrt(1 - b2), dt);  // scaled before squaring
            v = st[size_t(sv)] * b2 + gc * gc;
          }
          if (grp.wd != 0 && decoupled) p = p * astype(1.0 - grp.lr * grp.wd, dt);
          st[size_t(sm)] = m;
          st[size_t(sv)] = v;
          if (o.amsgrad) {
            int sx = slot(StateKind::max_exp_avg_sq);
            v = st[size_t(sx)] = maximum(st[size_t(sx)], v);
          }
          p = p - alpha * (m / (sqrt(v) + eps_hat));
        }
      },
      opt);
  return p;
}

}  // namespace

std::vector<double> TrainStep::group_lr(double multiplier) const {
  std::vector<double> out;
  for (const ParamGroup& g : groups) out.push_back(*g.lr * multiplier);
  return out;
}

std::vector<Array> TrainStep::scalar_inputs(std::span<const double> lr, double grad_scale) const {
  if (lr.size() != groups.size())
    fail("train step: {} learning rates for {} parameter groups", lr.size(), groups.size());
  if (!(grad_scale > 0) || !std::isfinite(grad_scale))
    fail("train step: grad_scale {} must be finite and > 0", grad_scale);
  std::vector<Array> out;
  for (double x : lr) out.push_back(Array::scalar<double>(x));
  out.push_back(Array::scalar<double>(grad_scale));
  return out;
}

std::vector<Array> TrainStep::inputs(std::vector<Array> other, std::vector<Array>& params,
                                     std::vector<Array>& state, std::span<const double> lr,
                                     double grad_scale) const {
  if (int(other.size()) != num_other_inputs || int(params.size()) != num_params ||
      int(state.size()) != this->state.size())
    fail("train step: got {} other inputs, {} params, {} state tensors; expected {}, {}, {}",
         other.size(), params.size(), state.size(), num_other_inputs, num_params,
         this->state.size());
  std::vector<Array> in = std::move(other);
  for (Array& p : params) in.push_back(std::move(p));
  for (Array& s : state) in.push_back(std::move(s));
  for (Array& s : scalar_inputs(lr, grad_scale)) in.push_back(std::move(s));
  return in;
}

void TrainStep::take_updated(std::vector<Array>& outputs, std::vector<Array>& params,
                             std::vector<Array>& state) const {
  if (outputs.size() != size_t(fn.num_outputs()))
    fail("train step: {} outputs, the program has {}", outputs.size(), fn.num_outputs());
  params.resize(size_t(num_params));
  state.resize(size_t(this->state.size()));
  for (int i = 0; i < num_params; ++i)
    params[size_t(i)] = std::move(outputs[size_t(param_output(i))]);
  for (int j = 0; j < this->state.size(); ++j)
    state[size_t(j)] = std::move(outputs[size_t(state_output(j))]);
}

TrainStep append_update(const Optimizer& opt, const ir::Function& G, int num_params,
                        const UpdateOptions& options) {
  validate(opt);
  ir::verify(G);
  const int nin = G.num_inputs(), nout = G.num_outputs();
  if (num_params < 0 || num_params > nin || num_params + 1 > nout)
    fail(
        "append_update: gradient function {} has {} inputs and {} outputs; cannot hold {} "
        "parameters plus the loss",
        G.name, nin, nout, num_params);
  if (options.max_norm && !(*options.max_norm > 0))
    fail("append_update: max_norm {} must be > 0", *options.max_norm);
  TrainStep ts;
  ts.num_other_inputs = nin - num_params;
  ts.num_params = num_params;
  ts.num_aux = nout - 1 - num_params;
  ts.groups = resolve_groups(opt, options.groups, num_params);
  ts.has_grad_norm = options.max_norm.has_value();

  auto in_name = [&](int k) {
    return size_t(k) < G.input_names.size() && !G.input_names[size_t(k)].empty()
               ? G.input_names[size_t(k)]
               : fmt::format("input{}", k);
  };
  std::vector<std::string> pnames;
  std::vector<ir::TensorType> masters;
  for (int i = 0; i < num_params; ++i) {
    const int k = ts.num_other_inputs + i;
    const ir::TensorType& pt = G.input_type(k);
    const ir::TensorType& gt = G.output_type(1 + ts.num_aux + i);
    if (!is_floating(pt.dtype) || !is_floating(gt.dtype) || pt.shape != gt.shape)
      fail("append_update: parameter {} '{}' is {} but its gradient (output {}) is {}", i,
           in_name(k), to_string(pt), 1 + ts.num_aux + i, to_string(gt));
    pnames.push_back(in_name(k));
    masters.push_back(master_type(pt));
  }
  ts.state = state_layout(opt, masters, pnames);

  ir::Builder b("train_step");
  trace::BuilderScope scope(b);
  std::vector<ir::ValueId> map(G.nodes.size(), -1);
  for (int k = 0; k < ts.num_other_inputs; ++k)
    map[size_t(G.inputs[size_t(k)])] = b.parameter(G.input_type(k), in_name(k));
  std::vector<Tensor> params, state;
  for (int i = 0; i < num_params; ++i) {
    params.emplace_back(&b, b.parameter(masters[size_t(i)], pnames[size_t(i)]));
    const ir::TensorType& pt = G.input_type(ts.num_other_inputs + i);
    map[size_t(G.inputs[size_t(ts.num_other_inputs + i)])] =
        pt.dtype == masters[size_t(i)].dtype ? params.back().id()
                                             : astype(params.back(), pt.dtype).id();
  }
  for (const StateSlot& s : ts.state.slots) state.emplace_back(&b, b.parameter(s.type, s.name));
  std::vector<Group> groups;
  for (const ParamGroup& g : ts.groups) {
    std::string n = ts.groups.size() == 1 ? "lr" : "lr." + g.name;
    groups.push_back({Tensor(&b, b.parameter({DType::f64, Shape{}}, n)), *g.weight_decay});
  }
  Tensor grad_scale(&b, b.parameter({DType::f64, Shape{}}, "grad_scale"));

  // Inline G: its parameters are the values mapped above.
  for (size_t v = 0; v < G.nodes.size(); ++v) {
    const ir::Node& nd = G.nodes[v];
    if (nd.op == ir::Op::parameter) {
      if (map[v] < 0) fail("append_update: parameter node %{} of {} is not an input", v, G.name);
      continue;
    }
    ir::Node c = nd;
    for (ir::ValueId& o : c.operands) o = map[size_t(o)];
    map[v] = b.add(std::move(c));
  }
  auto result = [&](int r) { return Tensor(&b, map[size_t(G.results[size_t(r)])]); };

  // found-inf over every gradient; global norm of the unscaled gradients; the scale that
  // unscales and clips (applied inside update_param).
  Tensor scale = 1.0 / grad_scale;  // f64
  std::vector<Tensor> grads;
  Tensor found, sumsq;
  for (int i = 0; i < num_params; ++i) {
    Tensor raw = result(1 + ts.num_aux + i);
    grads.push_back(astype(raw, masters[size_t(i)].dtype));
    if (options.check_finite) {
      // Σg is inf or NaN iff g holds one (or the sum overflows, see update.h). Reducing the raw
      // gradient reads it once and materializes nothing; 16-bit gradients are summed in f32.
      Tensor z = sum(raw.dtype() == DType::f64 ? raw : astype(raw, DType::f32)) * 0.0;
      Tensor bad = not_equal(z, z);  // z = Σg·0 is NaN iff Σg is not finite
      found = found.valid() ? (found | bad) : bad;
    }
    if (options.max_norm) {
      Tensor g32 = astype(raw, DType::f32);
      Tensor s = sum(g32 * g32);
      sumsq = sumsq.valid() ? sumsq + s : s;
    }
  }
  Tensor found_inf = found.valid() ? found : trace::scalar(0, DType::i1);
  Tensor grad_norm;
  if (options.max_norm) {
    grad_norm =
        sumsq.valid() ? sqrt(sumsq) * astype(scale, DType::f32) : trace::scalar(0, DType::f32);
    Tensor coef = minimum(*options.max_norm / (grad_norm + 1e-6), trace::scalar(1, DType::f32));
    scale = scale * astype(coef, DType::f64);
  }

  // The update, then the skip: every output is select(found_inf, old, new).
  Tensor step = state[size_t(ts.state.step_index())];
  Tensor t64 = astype(step + 1.0, DType::f64);
  std::vector<Tensor> new_state = state;
  std::vector<Tensor> new_params(static_cast<size_t>(num_params));
  for (size_t gi = 0; gi < ts.groups.size(); ++gi)
    for (int i : ts.groups[gi].params)
      new_params[size_t(i)] = update_param(opt, groups[gi], step, t64, params[size_t(i)],
                                           grads[size_t(i)], scale, ts.state, i, new_state);
  new_state[size_t(ts.state.step_index())] = step + 1.0;

  std::vector<ir::ValueId> results;
  std::vector<std::string> names;
  auto out_name = [&](int r, std::string dflt) {
    return size_t(r) < G.output_names.size() && !G.output_names[size_t(r)].empty()
               ? G.output_names[size_t(r)]
               : dflt;
  };
  for (int r = 0; r < 1 + ts.num_aux; ++r) {
    results.push_back(result(r).id());
    names.push_back(out_name(r, r == 0 ? "loss" : fmt::format("aux{}", r - 1)));
  }
  for (int i = 0; i < num_params; ++i) {
    results.push_back(select_scalar(found_inf, params[size_t(i)], new_params[size_t(i)]).id());
    names.push_back(pnames[size_t(i)]);
  }
  for (int j = 0; j < ts.state.size(); ++j) {
    results.push_back(select_scalar(found_inf, state[size_t(j)], new_state[size_t(j)]).id());
    names.push_back(ts.state.slots[size_t(j)].name);
  }
  results.push_back(found_inf.id());
  names.push_back("found_inf");
  if (options.max_norm) {
    results.push_back(grad_norm.id());
    names.push_back("grad_norm");
  }
  ts.fn = b.build(std::move(results), std::move(names));
  for (int i = 0; i < num_params; ++i)
    ts.fn.aliases.push_back({ts.param_output(i), ts.param_input(i)});
  for (int j = 0; j < ts.state.size(); ++j)
    ts.fn.aliases.push_back({ts.state_output(j), ts.state_input(j)});
  ir::verify(ts.fn);
  return ts;
}

}  // namespace tlaloc::optim
