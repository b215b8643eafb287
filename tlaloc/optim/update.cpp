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

// One parameter's update: one tlaloc.adam_update / tlaloc.sgd_update composite
// (composites/optimizer_update.cpp has the formulas and their op sequence). g: the raw gradient
// in the master dtype; scale: the f64 scalar that unscales and clips it; skip: found-inf (every
// result then equals its old value). `slot(kind)` is the layout index of p's state of that kind
// (a parameter's, or a flat bucket's). Returns p' and writes the new state tensors into st
// (indexed like the layout).
template <class SlotOf>
Tensor update_param(const Optimizer& opt, const Group& grp, const Tensor& step, const Tensor& p,
                    const Tensor& g, const Tensor& scale, const Tensor& skip, SlotOf slot,
                    std::vector<Tensor>& st) {
  std::vector<int> slots;
  std::vector<double> params;
  ir::Op op = ir::Op::adam_update;
  if (const SGD* o = std::get_if<SGD>(&opt)) {
    op = ir::Op::sgd_update;
    if (o->momentum != 0) slots.push_back(slot(StateKind::momentum_buffer));
    params = {o->momentum, o->dampening, grp.wd, double(o->nesterov), double(o->maximize)};
  } else {
    std::visit(
        [&](const auto& o) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(o)>, SGD>) {
            slots = {slot(StateKind::exp_avg), slot(StateKind::exp_avg_sq)};
            if (o.amsgrad) slots.push_back(slot(StateKind::max_exp_avg_sq));
            params = {o.betas[0],
                      o.betas[1],
                      o.eps,
                      grp.wd,
                      double(std::holds_alternative<AdamW>(opt)),
                      double(o.amsgrad),
                      double(o.maximize)};
          }
        },
        opt);
  }
  ir::Builder& b = p.builder();
  std::vector<ir::ValueId> ops{p.id(), g.id()};
  for (int s : slots) ops.push_back(st[size_t(s)].id());
  for (const Tensor* t : {&step, &grp.lr, &scale, &skip}) ops.push_back(t->id());
  std::vector<ir::ValueId> r = b.composite(op, ops, params);
  for (size_t k = 0; k < slots.size(); ++k) st[size_t(slots[k])] = Tensor(&b, r[k + 1]);
  return Tensor(&b, r[0]);
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
                                     double grad_scale, int64_t schedule_step) const {
  if (int(other.size()) != num_other_inputs || int(params.size()) != num_params ||
      int(state.size()) != this->state.size())
    fail("train step: got {} other inputs, {} params, {} state tensors; expected {}, {}, {}",
         other.size(), params.size(), state.size(), num_other_inputs, num_params,
         this->state.size());
  std::vector<Array> in = std::move(other);
  for (Array& p : params) in.push_back(std::move(p));
  for (Array& s : state) in.push_back(std::move(s));
  for (Array& s : scalar_inputs(lr, grad_scale)) in.push_back(std::move(s));
  if (has_schedule_step) in.push_back(Array::scalar<int32_t>(int32_t(schedule_step)));
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
  if (options.replicas < 1) fail("append_update: replicas {} must be >= 1", options.replicas);
  if (options.replicated_aux < 0)
    fail("append_update: replicated_aux {} must be >= 0", options.replicated_aux);
  if (options.zero != 0 && options.zero != 1)
    fail("append_update: ZeRO stage {} is not built (0: off, 1: optimizer state sharded)",
         options.zero);
  // With loss scaling, G's last input before the parameters is the scale (its loss seed).
  const bool scaling = options.loss_scaling.has_value();
  const int g_other = nin - num_params;
  if (scaling && (g_other < 1 || G.input_type(g_other - 1) != ir::TensorType{DType::f32, {}}))
    fail(
        "append_update: with loss scaling, {}'s input before the parameters must be the f32 "
        "scalar loss scale",
        G.name);
  TrainStep ts;
  ts.num_other_inputs = g_other - int(scaling);
  ts.num_params = num_params;
  ts.num_aux = nout - 1 - num_params;
  if (options.replicated_aux > ts.num_aux)
    fail("append_update: replicated_aux {} is more than the {} aux outputs of {}",
         options.replicated_aux, ts.num_aux, G.name);
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
    const int k = g_other + i;
    const ir::TensorType& pt = G.input_type(k);
    const ir::TensorType& gt = G.output_type(1 + ts.num_aux + i);
    if (!is_floating(pt.dtype) || !is_floating(gt.dtype) || pt.shape != gt.shape)
      fail("append_update: parameter {} '{}' is {} but its gradient (output {}) is {}", i,
           in_name(k), to_string(pt), 1 + ts.num_aux + i, to_string(gt));
    pnames.push_back(in_name(k));
    masters.push_back(master_type(pt));
  }
  const bool zero = options.zero == 1 && options.replicas > 1;
  if (zero && options.flat_state)
    fail("append_update: flat optimizer state with ZeRO-1 is not built (use one or the other)");
  if (zero) {
    ts.zero = zero_shard(opt, masters, pnames, options.rank, options.replicas);
    if (scaling) add_loss_scaling(ts.zero->full, *options.loss_scaling);
    ts.state = shard_layout(*ts.zero);
  } else if (options.flat_state) {
    ts.flat = flat_state(opt, ts.groups, masters, pnames);
    if (scaling) add_loss_scaling(ts.flat->full, *options.loss_scaling);
    ts.state = flat_layout(*ts.flat);
  } else {
    ts.state = state_layout(opt, masters, pnames);
    if (scaling) add_loss_scaling(ts.state, *options.loss_scaling);
  }

  ir::Builder b("train_step");
  trace::BuilderScope scope(b);
  std::vector<ir::ValueId> map(G.nodes.size(), -1);
  for (int k = 0; k < ts.num_other_inputs; ++k)
    map[size_t(G.inputs[size_t(k)])] = b.parameter(G.input_type(k), in_name(k));
  std::vector<Tensor> params, state;
  for (int i = 0; i < num_params; ++i) {
    params.emplace_back(&b, b.parameter(masters[size_t(i)], pnames[size_t(i)]));
    const ir::TensorType& pt = G.input_type(g_other + i);
    map[size_t(G.inputs[size_t(g_other + i)])] = pt.dtype == masters[size_t(i)].dtype
                                                     ? params.back().id()
                                                     : astype(params.back(), pt.dtype).id();
  }
  for (const StateSlot& s : ts.state.slots) state.emplace_back(&b, b.parameter(s.type, s.name));
  std::vector<Group> groups;
  for (const ParamGroup& g : ts.groups) {
    std::string n = ts.groups.size() == 1 ? "lr" : "lr." + g.name;
    groups.push_back({Tensor(&b, b.parameter({DType::f64, Shape{}}, n)), *g.weight_decay});
  }
  Tensor grad_scale(&b, b.parameter({DType::f64, Shape{}}, "grad_scale"));
  Tensor schedule_step;  // the lr inputs are base lrs, scheduled here
  if (options.schedule) {
    ts.has_schedule_step = true;
    schedule_step = Tensor(&b, b.parameter({DType::s32, Shape{}}, "schedule_step"));
    const Tensor factor = options.schedule->factor_in_program(schedule_step);
    for (Group& g : groups) g.lr = g.lr * factor;  // group_lr's base · factor
  }
  Tensor loss_scale, tracker;  // the loss scaler's state
  if (scaling) {
    loss_scale = state[size_t(ts.state.find(-1, StateKind::loss_scale))];
    tracker = state[size_t(ts.state.find(-1, StateKind::growth_tracker))];
    map[size_t(G.inputs[size_t(g_other - 1)])] = loss_scale.id();
  }

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
  // Data parallelism: the ranks' loss, aux outputs and gradients combined (see UpdateOptions).
  const int R = options.replicas;
  const bool loss_mean = options.replica_loss == UpdateOptions::ReplicaLoss::mean;
  auto across = [&](const Tensor& t, ir::ReduceKind k) {
    return Tensor(&b, b.all_reduce(t.id(), k, ir::all_replicas(R)));
  };
  auto result = [&](int r) {
    Tensor t(&b, map[size_t(G.results[size_t(r)])]);
    if (R == 1 || (r > ts.num_aux - options.replicated_aux && r <= ts.num_aux)) return t;
    if (!is_floating(t.dtype()))
      return across(t, t.dtype() == DType::i1 ? ir::ReduceKind::max : ir::ReduceKind::sum);
    Tensor s = across(t, ir::ReduceKind::sum);
    // Gradients stay sums (their 1/R goes into the update's scale); the loss as asked; aux and
    // buffers averaged.
    const bool grad = r >= 1 + ts.num_aux;
    return grad || (r == 0 && !loss_mean) ? s : s * (1.0 / R);
  };

  // found-inf over every gradient; global norm of the unscaled gradients; the scale that
  // unscales and clips (applied inside update_param).
  Tensor scale = 1.0 / grad_scale;  // f64
  if (scaling) scale = scale / astype(loss_scale, DType::f64);
  if (R > 1 && loss_mean) scale = scale * (1.0 / R);
  // The clipping norm is summed in f32 (as torch.nn.utils.clip_grad_norm_ sums f32 gradients),
  // in f64 when a parameter is f64, whose squares would overflow f32.
  DType norm_dtype = DType::f32;
  for (const ir::TensorType& m : masters)
    if (m.dtype == DType::f64) norm_dtype = DType::f64;
  std::vector<Tensor> grads, flat;
  Tensor sumsq;
  for (int i = 0; i < num_params; ++i) {
    Tensor raw = result(1 + ts.num_aux + i);
    grads.push_back(astype(raw, masters[size_t(i)].dtype));
    if (options.check_finite)
      flat.push_back(reshape(astype(raw, norm_dtype), {raw.type().shape.numel()}));
    if (options.max_norm) {
      Tensor gn = astype(raw, norm_dtype);
      Tensor s = sum(gn * gn);
      sumsq = sumsq.valid() ? sumsq + s : s;
    }
  }
  // found-inf: Σ over every gradient's elements (in norm_dtype) is inf or NaN iff one holds an
  // inf or NaN (or the sum overflows, see update.h). One reduction of the gradients
  // concatenated: XLA reads them all in one kernel; the host lane splits it into one sum per
  // gradient, each inside the loop that produces the gradient, so nothing is copied.
  Tensor found_inf = trace::scalar(0, DType::i1);
  if (!flat.empty()) {
    Tensor all = flat.size() == 1 ? flat[0] : trace::concat(flat, 0);
    Tensor z = sum(all) * 0.0;
    found_inf = not_equal(z, z);  // z = Σg·0 is NaN iff Σg is not finite
  }
  Tensor grad_norm;
  if (options.max_norm) {
    Tensor norm =
        sumsq.valid() ? sqrt(sumsq) * astype(scale, norm_dtype) : trace::scalar(0, norm_dtype);
    Tensor coef = minimum(*options.max_norm / (norm + 1e-6), trace::scalar(1, norm_dtype));
    scale = scale * astype(coef, DType::f64);
    grad_norm = astype(norm, DType::f32);
  }

  // The updates, each skipping itself when found_inf is set; then the step count.
  Tensor step = state[size_t(ts.state.step_index())];
  std::vector<Tensor> new_state = state;
  std::vector<Tensor> new_params(static_cast<size_t>(num_params));
  if (ts.flat) {
    // One update per bucket over its parameters and gradients flattened and concatenated; each
    // parameter's new value is its range of the bucket's.
    for (size_t k = 0; k < ts.flat->buckets.size(); ++k) {
      const FlatBucket& bk = ts.flat->buckets[k];
      auto flatten = [&](const std::vector<Tensor>& each) {
        std::vector<Tensor> parts;
        for (int i : bk.params)
          parts.push_back(reshape(each[size_t(i)], {each[size_t(i)].type().shape.numel()}));
        return parts.size() == 1 ? parts[0] : trace::concat(parts, 0);
      };
      auto slot = [&](StateKind kind) { return ts.state.find_bucket(int(k), kind); };
      const Tensor p = update_param(opt, groups[size_t(bk.group)], step, flatten(params),
                                    flatten(grads), scale, found_inf, slot, new_state);
      for (size_t j = 0; j < bk.params.size(); ++j) {
        const size_t i = size_t(bk.params[j]);
        const int64_t lo = bk.offset[j], n = masters[i].shape.numel();
        new_params[i] = reshape(slice(p, 0, lo, lo + n), masters[i].shape.dims);
      }
    }
    for (int i = 0; i < num_params; ++i)  // no elements: nothing to update
      if (!new_params[size_t(i)].valid()) new_params[size_t(i)] = params[size_t(i)];
  } else if (!zero) {
    for (size_t gi = 0; gi < ts.groups.size(); ++gi)
      for (int i : ts.groups[gi].params) {
        auto slot = [&](StateKind kind) { return ts.state.find(i, kind); };
        new_params[size_t(i)] = update_param(opt, groups[gi], step, params[size_t(i)],
                                             grads[size_t(i)], scale, found_inf, slot, new_state);
      }
  } else {
    // ZeRO-1: this rank updates its chunk of each parameter, and each parameter's chunks are
    // gathered from every rank.
    const ZeroShard& z = *ts.zero;
    std::vector<size_t> group_of(size_t(num_params), 0);
    for (size_t gi = 0; gi < ts.groups.size(); ++gi)
      for (int i : ts.groups[gi].params) group_of[size_t(i)] = gi;
    for (int i = 0; i < num_params; ++i) {
      const size_t k = size_t(i);
      const DType dt = masters[k].dtype;
      Tensor chunk;
      if (const ShardPiece* pc = z.piece(i)) {
        Tensor p = slice(reshape(params[k], {z.numel[k]}), 0, pc->lo, pc->hi);
        Tensor g = slice(reshape(grads[k], {z.numel[k]}), 0, pc->lo, pc->hi);
        auto slot = [&](StateKind kind) { return ts.state.find(i, kind); };
        chunk =
            update_param(opt, groups[group_of[k]], step, p, g, scale, found_inf, slot, new_state);
        if (pc->hi - pc->lo < z.chunk[k])
          chunk =
              trace::concat({chunk, trace::full(Shape{z.chunk[k] - (pc->hi - pc->lo)}, 0, dt)}, 0);
      } else {
        chunk = trace::full(Shape{z.chunk[k]}, 0, dt);
      }
      // Rows that split evenly are gathered in the parameter's own shape (chunk r is then rows
      // r·d0/N ..), so the gather can write the new parameter in place of the old one.
      std::vector<int64_t> dims = masters[k].shape.dims;
      const bool by_rows = !dims.empty() && dims[0] % R == 0;
      if (by_rows) {
        dims[0] /= R;
        chunk = reshape(chunk, dims);
      }
      Tensor all(&b, b.all_gather(chunk.id(), 0, ir::all_replicas(R)));
      if (by_rows) {
        new_params[k] = all;
        continue;
      }
      if (z.chunk[k] * R != z.numel[k]) all = slice(all, 0, 0, z.numel[k]);
      new_params[k] = reshape(all, masters[k].shape.dims);
    }
  }
  new_state[size_t(ts.state.step_index())] = select_scalar(found_inf, step, step + 1.0);
  if (scaling) {
    // GradScaler.update (torch._amp_update_scale_): back off on inf / NaN; grow after
    // growth_interval finite steps in a row, only to a finite scale.
    const UpdateOptions::LossScaling& ls = *options.loss_scaling;
    Tensor zero = trace::scalar(0, DType::s32);
    Tensor next = tracker + trace::scalar(1, DType::s32);
    Tensor grow = equal(next, trace::scalar(double(ls.growth_interval), DType::s32));
    Tensor grown = loss_scale * ls.growth_factor;
    Tensor finite = equal(grown * 0.0, trace::scalar(0, DType::f32));  // inf * 0 is NaN
    Tensor kept = select_scalar(grow & finite, grown, loss_scale);
    new_state[size_t(ts.state.find(-1, StateKind::loss_scale))] =
        select_scalar(found_inf, loss_scale * ls.backoff_factor, kept);
    new_state[size_t(ts.state.find(-1, StateKind::growth_tracker))] =
        select_scalar(found_inf | grow, zero, next);
  }

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
    results.push_back(new_params[size_t(i)].id());
    names.push_back(pnames[size_t(i)]);
  }
  for (int j = 0; j < ts.state.size(); ++j) {
    results.push_back(new_state[size_t(j)].id());
    names.push_back(ts.state.slots[size_t(j)].name);
  }
  results.push_back(found_inf.id());
  names.push_back("found_inf");
  if (options.max_norm) {
    results.push_back(grad_norm.id());
    names.push_back("grad_norm");
  }
  if (options.schedule) {
    results.push_back((schedule_step + trace::scalar(1, DType::s32)).id());
    names.push_back("schedule_step");
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
