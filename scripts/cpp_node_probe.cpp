// A C++ autograd node shaped like reimpl.fast's differentiable LayerNorm, for scripts/cpp_node_probe.py:
// the plan key (sizes, dtype, device, contiguity, address bits of x, w, b) hashed and looked up,
// three outputs allocated, one launch through a function pointer (a no-op here: the probe times the
// host's side only), x, w and b saved; the backward allocates dX, dw and db and makes one "launch".
#include <torch/extension.h>
#include <unordered_map>
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
typedef void (*launch_fn)(void*, void*, void*, void*, void*, void*, int64_t);

static void noop_launch(void*, void*, void*, void*, void*, void*, int64_t) {}

// the plan key of (x, w, b): sizes, dtype, device, contiguity and address bits, hashed
static uint64_t key_of(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const at::Tensor* t : {&x, &w, &b}) {
    if (!t->defined()) { mix(0xdead); continue; }
    for (auto s : t->sizes()) mix((uint64_t)s);
    mix((uint64_t)t->scalar_type()); mix((uint64_t)t->device().index() + 7);
    mix(t->is_contiguous()); mix(((uintptr_t)t->data_ptr()) & 63);
  }
  return h;
}

struct Plan { launch_fn launch; };
static std::unordered_map<uint64_t, Plan> plans;

struct LNFn : public torch::autograd::Function<LNFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor w, at::Tensor b) {
    auto it = plans.find(key_of(x, w, b));
    launch_fn launch = it == plans.end() ? noop_launch : it->second.launch;
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    auto opts = x.options().dtype(at::kFloat);
    at::Tensor mean = at::empty({x.size(0), 1}, opts), rstd = at::empty({x.size(0), 1}, opts);
    launch(x.data_ptr(), w.data_ptr(), b.data_ptr(), out.data_ptr(), mean.data_ptr(), rstd.data_ptr(), x.size(1));
    ctx->save_for_backward({x, w, b});
    ctx->saved_data["mean"] = mean; ctx->saved_data["rstd"] = rstd;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    at::Tensor dx = at::empty_like(saved[0]), dw = at::empty_like(saved[1]), db = at::empty_like(saved[2]);
    noop_launch(grads[0].data_ptr(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(), nullptr, nullptr, 0);
    return {dx, dw, db};
  }
};

at::Tensor ln(at::Tensor x, at::Tensor w, at::Tensor b) { return LNFn::apply(x, w, b); }
void add_plan(at::Tensor x, at::Tensor w, at::Tensor b) { plans[key_of(x, w, b)] = Plan{noop_launch}; }
