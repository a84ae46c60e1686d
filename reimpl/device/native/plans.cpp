// Launch plans replayed in C++, with a C++ autograd node: the host path of a differentiable
// LayerNorm or RMSNorm call once its signature has a plan (reimpl/device/replay.py).
//
// Python's path for such a call reads about fifteen tensor attributes to build the plan key, looks
// the signature up, enters torch.autograd.Function's Python machinery, allocates, launches and saves,
// each step a Python call. Here the same facts are read in C++, hashed, and looked up; the outputs
// are allocated, the plan's launches made with cuLaunchKernel on torch's current stream, and the
// node is a torch::autograd::Function. What it does not know it leaves to Python: a call it has no
// entry for returns None (Python's path runs, and registers the entry after that signature's first
// call), and the backward calls the signature's Python run_backward, as the Python node does.
//
// An entry is keyed by every fact the Python plan key holds (per tensor: sizes, dtype, device index,
// contiguity, the address's low six bits; the normalized shape; eps with its sign) and by the runtime
// and op. Its launches are the plan's: the same CUfunction handles, grid, block, shared bytes, and
// arguments, each a constant or the address of an input or output.
#include <torch/extension.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <dlfcn.h>

#include <cstring>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// The driver entry points, found in the libcuda that torch and CuPy have already loaded: no link
// against the CUDA toolkit, so the module builds where there is none (the CPU tests build it).
using launch_t = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                         void**);
using ctx_current_t = int (*)(void**);
struct Driver {
  launch_t launch = nullptr;
  ctx_current_t ctx_current = nullptr;
};
const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib != nullptr) {
      r.launch = reinterpret_cast<launch_t>(dlsym(lib, "cuLaunchKernel"));
      r.ctx_current = reinterpret_cast<ctx_current_t>(dlsym(lib, "cuCtxGetCurrent"));
    }
    return r;
  }();
  return d;
}

enum ArgKind : int { PTR = 0, I32 = 1, I64 = 2, F32 = 3, F64 = 4, SCRATCH = 5 };

struct Arg {
  int kind;
  int64_t index;  // PTR: the tensor (inputs, then outputs); else unused
  int64_t i;      // I32, I64; SCRATCH: its bytes
  double f;       // F32, F64
};

struct Launch {
  void* fn;
  unsigned grid[3], block[3], shared;
  int slot;  // the runtime's launch_counts slot this launch adds one to
  std::vector<Arg> args;
};

struct Output {
  bool absent;  // an output the call does not make (a gradient not asked for)
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  int like;  // a contiguous input of the same shape and dtype (empty_like of it), or -1
};

// One plan: its outputs and launches, on one device (`place`: that device as Python's scratch takes it)
struct Replay {
  int64_t device;
  py::object place;
  std::vector<Output> outputs;
  std::vector<Launch> launches;
};

struct Entry {
  int64_t token;  // the runtime's
  int op;  // 0 LayerNorm (x, w, b), 1 RMSNorm (x, w)
  void* context;  // the CUDA context the plan's functions were loaded in
  Replay forward;
  py::object rt, sig, counts;  // the runtime (its `record`), the Python signature, rt.launch_counts
  // the backward's plans by case (as the signature's: mask, the gradient's contiguity, address bits);
  // null where the case keeps none (Python's path runs it)
  std::mutex backward_lock;
  std::unordered_map<std::string, std::unique_ptr<Replay>> backward;
};

// Entries are never freed: a saved node may still point at one after `clear`. They are few (one per
// signature), and `clear` keeps what it drops.
std::shared_mutex table_lock;
std::unordered_map<std::string, Entry*> table;
// never destroyed: an Entry's Python objects must not be released after the interpreter has ended
std::vector<std::unique_ptr<Entry>>& kept = *new std::vector<std::unique_ptr<Entry>>();
std::atomic<int64_t> served{0};           // forward calls this module has run (tests ask)
std::atomic<int64_t> served_backward{0};  // backward calls it has replayed

template <typename V>
void put(std::string& k, V v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put_tensor(std::string& k, const at::Tensor* t) {
  if (t == nullptr) {
    put<int8_t>(k, -1);
    return;
  }
  put<int8_t>(k, static_cast<int8_t>(t->dim()));
  for (int64_t s : t->sizes()) put(k, s);
  for (int64_t s : t->strides()) put(k, s);  // beyond Python's key: what rms_norm's route reads
  put<int8_t>(k, static_cast<int8_t>(t->scalar_type()));
  put<int8_t>(k, static_cast<int8_t>(t->device().type()));
  put<int8_t>(k, t->device().index());
  put<int8_t>(k, t->is_contiguous());
  put<int8_t>(k, static_cast<int8_t>(reinterpret_cast<uintptr_t>(t->data_ptr()) & 63));
}

// The key of a call, or false where an argument is not what a plan can serve (not a tensor, an
// odd normalized shape): Python's path then runs and raises whatever torch raises.
bool key_of(int op, int64_t token, const std::vector<py::handle>& tensors, py::handle shape, py::handle eps,
            std::string& k, std::vector<at::Tensor>& held) {
  k.reserve(200);
  put<int8_t>(k, static_cast<int8_t>(op));
  put(k, token);
  for (py::handle h : tensors) {
    if (h.is_none()) {
      held.emplace_back();
      put_tensor(k, nullptr);
      continue;
    }
    if (!THPVariable_Check(h.ptr())) return false;
    held.push_back(THPVariable_Unpack(h.ptr()));
    const at::Tensor& t = held.back();
    // plain strided tensors with storage only (not a tracer's fake, sparse or nested tensor)
    if (t.layout() != at::kStrided || t.is_nested() || !t.has_storage() || t.unsafeGetTensorImpl()->is_python_dispatch())
      return false;
    try {
      put_tensor(k, &t);
    } catch (const std::exception&) {  // an address that cannot be read: Python's path says why
      return false;
    }
  }
  if (!PyTuple_Check(shape.ptr())) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(shape.ptr());
  put<int8_t>(k, static_cast<int8_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(shape.ptr(), i);
    if (!PyLong_CheckExact(item)) return false;
    put<int64_t>(k, PyLong_AsLongLong(item));
  }
  if (eps.is_none()) {
    put<int8_t>(k, 0);
  } else {
    if (!PyFloat_CheckExact(eps.ptr())) return false;
    put<int8_t>(k, 1);
    put(k, PyFloat_AS_DOUBLE(eps.ptr()));  // the bits, so -0.0 and 0.0 differ as in Python's key
  }
  return true;
}

Entry* find(const std::string& k) {
  std::shared_lock<std::shared_mutex> lock(table_lock);
  auto it = table.find(k);
  return it == table.end() ? nullptr : it->second;
}

int64_t current_device() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
}

// A replay's outputs, allocated, and its launches, made on the device's current stream. Called with
// the GIL held: the launch counts are a Python list, and a scratch buffer is Python's (replay.scratch).
std::vector<at::Tensor> run(const Replay& r, const std::vector<at::Tensor>& inputs, const py::object& counts) {
  std::vector<at::Tensor> outs;
  outs.reserve(r.outputs.size());
  for (const Output& o : r.outputs) {
    if (o.absent) {
      outs.emplace_back();
    } else if (o.like >= 0) {
      outs.push_back(at::empty_like(inputs[o.like], at::MemoryFormat::Contiguous));
    } else {
      outs.push_back(at::empty(o.shape, at::TensorOptions().dtype(o.dtype).device(c10::kCUDA, r.device)));
    }
  }
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(r.device));
  void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle();
  const Driver& d = driver();
  for (const Launch& l : r.launches) {
    int64_t slots[16];
    void* params[16];
    size_t a = 0;
    for (const Arg& arg : l.args) {
      void* p = &slots[a];
      switch (arg.kind) {
        case PTR: {
          const size_t n = inputs.size();
          const at::Tensor& t = arg.index < static_cast<int64_t>(n) ? inputs[arg.index] : outs[arg.index - n];
          slots[a] = t.defined() ? reinterpret_cast<int64_t>(t.data_ptr()) : 0;
          break;
        }
        case I32: *static_cast<int32_t*>(p) = static_cast<int32_t>(arg.i); break;
        case I64: slots[a] = arg.i; break;
        case F32: *static_cast<float*>(p) = static_cast<float>(arg.f); break;
        case SCRATCH: {  // the stream's own buffer, asked for on every replay as Python's replay does
          // held for the process's life: a static py::object would be released after Python ends
          static py::object* scratch = new py::object(py::module_::import("reimpl.device.replay").attr("scratch"));
          slots[a] = (*scratch)(r.place, reinterpret_cast<int64_t>(stream), arg.i).cast<int64_t>();
          break;
        }
        default: std::memcpy(p, &arg.f, sizeof(double));
      }
      params[a] = p;
      ++a;
    }
    const int rc = d.launch(l.fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.shared,
                            stream, params, nullptr);
    TORCH_CHECK(rc == 0, "cuLaunchKernel failed with CUresult ", rc);
  }
  PyObject* c = counts.ptr();
  for (const Launch& l : r.launches) {
    PyObject* old = PyList_GET_ITEM(c, l.slot);
    PyList_SetItem(c, l.slot, PyLong_FromLongLong(PyLong_AsLongLong(old) + 1));
  }
  return outs;
}

// What a replay needs of this thread: its device current, that device's context current here (a
// fresh thread goes through Python's path once, which makes it so), and no launches being recorded.
bool can_replay(const Entry& e, int64_t device) {
  if (current_device() != device) return false;
  void* ctx = nullptr;
  if (driver().ctx_current(&ctx) != 0 || ctx != e.context) return false;
  return e.rt.attr("record").is_none();
}

// A plan as native.entry_spec gives it: ([(shape, dtype, like) or None], [(function, grid, block,
// shared, slot, [(kind, index, int, float)])]), on device `place`; null where it is not one.
std::unique_ptr<Replay> parse(py::handle outputs, py::handle launches, py::handle place) {
  auto r = std::make_unique<Replay>();
  r->place = py::reinterpret_borrow<py::object>(place);
  r->device = place.attr("index").cast<int64_t>();
  for (py::handle o : outputs) {
    if (o.is_none()) {
      r->outputs.push_back(Output{true, {}, at::kFloat, -1});
      continue;
    }
    auto t = o.cast<py::tuple>();
    if (!THPDtype_Check(t[1].ptr())) return nullptr;
    r->outputs.push_back(Output{false, t[0].cast<std::vector<int64_t>>(),
                                reinterpret_cast<THPDtype*>(t[1].ptr())->scalar_type, t[2].cast<int>()});
  }
  for (py::handle l : launches) {
    auto t = l.cast<py::tuple>();
    Launch launch;
    launch.fn = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
    auto g = t[1].cast<std::vector<unsigned>>(), b = t[2].cast<std::vector<unsigned>>();
    for (int i = 0; i < 3; ++i) launch.grid[i] = g[i], launch.block[i] = b[i];
    launch.shared = t[3].cast<unsigned>();
    launch.slot = t[4].cast<int>();
    for (py::handle a : t[5].cast<py::list>()) {
      auto at = a.cast<py::tuple>();
      launch.args.push_back(Arg{at[0].cast<int>(), at[1].cast<int64_t>(), at[2].cast<int64_t>(), at[3].cast<double>()});
    }
    if (launch.args.size() > 16) return nullptr;
    r->launches.push_back(std::move(launch));
  }
  return r;
}

// The backward's case, as the Python signature's (autograd._Signature.run_backward): which inputs
// need a gradient, the incoming gradient's contiguity, the low bits of every tensor's address.
std::string case_of(const bool (&need)[3], const std::vector<at::Tensor>& tensors) {
  std::string k;
  for (bool n : need) put<int8_t>(k, n);
  put<int8_t>(k, tensors[0].is_contiguous());
  for (const at::Tensor& t : tensors)
    put<int8_t>(k, t.defined() ? static_cast<int8_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) & 63) : -1);
  return k;
}

struct NormFunction : public torch::autograd::Function<NormFunction> {
  // x, w and b as the Python node's inputs (b absent for RMSNorm), then the entry's address. An
  // absent weight or bias is nullopt, not an undefined tensor: apply() asks every tensor argument
  // for its device.
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, std::optional<at::Tensor> w_,
                            std::optional<at::Tensor> b_, int64_t entry) {
    const Entry& e = *reinterpret_cast<const Entry*>(entry);
    const at::Tensor w = w_.value_or(at::Tensor()), b = b_.value_or(at::Tensor());
    std::vector<at::Tensor> outs =
        run(e.forward, e.op == 0 ? std::vector<at::Tensor>{x, w, b} : std::vector<at::Tensor>{x, w}, e.counts);
    if (e.op == 0) {
      ctx->save_for_backward({x, w, b});
      ctx->saved_data["mean"] = outs[1];
      ctx->saved_data["rstd"] = outs[2];
    } else {
      ctx->save_for_backward({x, w});
      ctx->saved_data["rstd"] = outs[1];
    }
    ctx->saved_data["entry"] = entry;
    return outs[0];
  }

  // The backward op's tensors in its schema's order, the gradient first: the backward plan's inputs.
  // A case with a plan replays it here; any other runs the signature's Python run_backward, and after
  // it the case's plan (or the fact that it has none) is kept.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Entry& e = *reinterpret_cast<Entry*>(ctx->saved_data["entry"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    const bool graph = at::GradMode::is_enabled();
    // needs_input_grad counts the node's edges, one per tensor given (an absent weight has none)
    bool need[3] = {false, false, false};
    for (size_t i = 0, edge = 0; i < saved.size(); ++i)
      if (saved[i].defined()) need[i] = ctx->needs_input_grad(edge++);
    const std::vector<at::Tensor> tensors =
        e.op == 0 ? std::vector<at::Tensor>{grads[0], saved[0], ctx->saved_data["mean"].toTensor(),
                                            ctx->saved_data["rstd"].toTensor(), saved[1], saved[2]}
                  : std::vector<at::Tensor>{grads[0], saved[0], ctx->saved_data["rstd"].toTensor(), saved[1]};
    py::gil_scoped_acquire gil;
    std::string k;
    bool known = false;
    if (!graph && grads[0].defined() && can_replay(e, e.forward.device)) {
      k = case_of(need, tensors);
      const Replay* r = nullptr;
      {
        std::lock_guard<std::mutex> lock(e.backward_lock);
        auto it = e.backward.find(k);
        if (it != e.backward.end()) known = true, r = it->second.get();
      }
      if (r != nullptr) {
        std::vector<at::Tensor> outs = run(*r, tensors, e.counts);
        served_backward.fetch_add(1, std::memory_order_relaxed);
        outs.resize(3);
        outs.emplace_back();  // the entry's address
        return outs;
      }
    }
    auto wrap = [](const at::Tensor& t) -> py::object {
      return t.defined() ? py::reinterpret_steal<py::object>(THPVariable_Wrap(t)) : py::none();
    };
    py::list items;
    for (const at::Tensor& t : tensors) items.append(wrap(t));
    const py::tuple args(items);
    py::list needs;
    for (size_t i = 0; i < (e.op == 0 ? 3u : 2u); ++i) needs.append(need[i]);
    const py::tuple mask(needs);
    // with a graph of the backward asked for, Python's once_differentiable wrapper, as the Python node
    py::object result = e.sig.attr(graph ? "run_backward_under_graph" : "run_backward")(args, mask);
    if (!k.empty() && !known) {  // this case's first backward: keep its plan
      static py::object* spec_of = new py::object(py::module_::import("reimpl.device.native").attr("backward_spec"));
      py::object spec = (*spec_of)(e.sig, args, mask);
      std::unique_ptr<Replay> r = spec.is_none() ? nullptr : parse(spec[py::int_(0)], spec[py::int_(1)], spec[py::int_(2)]);
      std::lock_guard<std::mutex> lock(e.backward_lock);
      e.backward.emplace(k, std::move(r));
    }
    variable_list out;
    for (py::handle h : result) out.push_back(h.is_none() ? at::Tensor() : THPVariable_Unpack(h.ptr()));
    while (out.size() < 3) out.emplace_back();
    out.emplace_back();  // the entry's address
    return out;
  }
};

// The node's output for a call whose key has an entry, else None.
py::object call(int op, int64_t token, const std::vector<py::handle>& tensors, py::handle shape, py::handle eps) {
  // a call that records no graph takes Python's path, which allocates the output only: asked first,
  // as it costs the least
  if (!at::GradMode::is_enabled()) return py::none();
  bool grad = false;
  for (py::handle h : tensors)
    grad = grad || (THPVariable_Check(h.ptr()) && THPVariable_Unpack(h.ptr()).requires_grad());
  if (!grad) return py::none();
  std::string k;
  std::vector<at::Tensor> held;
  if (!key_of(op, token, tensors, shape, eps, k, held)) return py::none();
  Entry* e = find(k);
  if (e == nullptr) return py::none();
  if (held[0].device().index() != e->forward.device || !can_replay(*e, e->forward.device)) return py::none();
  auto given = [&](size_t i) {
    return i < held.size() && held[i].defined() ? std::optional<at::Tensor>(held[i]) : std::nullopt;
  };
  at::Tensor out = NormFunction::apply(held[0], given(1), given(2), reinterpret_cast<int64_t>(e));
  served.fetch_add(1, std::memory_order_relaxed);
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(out));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Launch plans replayed in C++ behind a C++ autograd node (reimpl/device/native.py)";
  m.def("available", [] { return driver().launch != nullptr && driver().ctx_current != nullptr; });
  m.def("layer_norm", [](py::handle x, py::handle w, py::handle b, py::handle shape, py::handle eps, int64_t token) {
    return call(0, token, {x, w, b}, shape, eps);
  });
  m.def("rms_norm", [](py::handle x, py::handle w, py::handle shape, py::handle eps, int64_t token) {
    return call(1, token, {x, w}, shape, eps);
  });
  // an entry for the key of (op, token, tensors, shape, eps): outputs [(shape, dtype, like)],
  // launches [(function, grid, block, shared, slot, [(kind, index, int, float)])]
  // an entry for the key of (op, token, tensors, shape, eps), replaying the forward plan given as
  // `parse` takes it, backed by the runtime rt and the Python signature sig
  m.def("add", [](int op, int64_t token, std::vector<py::handle> tensors, py::handle shape, py::handle eps,
                  py::handle place, py::list outputs, py::list launches, py::object rt, py::object sig) {
    std::string k;
    std::vector<at::Tensor> held;
    if (!key_of(op, token, tensors, shape, eps, k, held)) return false;
    std::unique_ptr<Replay> forward = parse(outputs, launches, place);
    if (forward == nullptr) return false;
    auto e = std::make_unique<Entry>();
    e->token = token;
    e->op = op;
    if (driver().ctx_current == nullptr || driver().ctx_current(&e->context) != 0) return false;
    e->forward = std::move(*forward);
    e->rt = rt;
    e->sig = sig;
    e->counts = rt.attr("launch_counts");
    std::unique_lock<std::shared_mutex> lock(table_lock);
    table[k] = e.get();
    kept.push_back(std::move(e));
    return true;
  });
  m.def("clear", [](int64_t token) {  // the entries of one runtime
    std::unique_lock<std::shared_mutex> lock(table_lock);
    for (auto it = table.begin(); it != table.end();) it = it->second->token == token ? table.erase(it) : std::next(it);
  });
  // the key of a call, as bytes (None where no entry could serve it): for tests, on any device
  m.def("key", [](int op, int64_t token, std::vector<py::handle> tensors, py::handle shape, py::handle eps) -> py::object {
    std::string k;
    std::vector<at::Tensor> held;
    if (!key_of(op, token, tensors, shape, eps, k, held)) return py::none();
    return py::bytes(k);
  });
  m.def("served", [] { return served.load(); });
  m.def("served_backward", [] { return served_backward.load(); });
  m.def("size", [] {
    std::shared_lock<std::shared_mutex> lock(table_lock);
    return table.size();
  });
}
