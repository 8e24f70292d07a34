// A C interface to the ExecuTorch 1.5.1 runtime (the wheel's libexecutorch.so and kernel and
// backend libraries), for hfexport-executorch's `runtime` feature. The wheel ships C++ headers
// and shared libraries but no C API; this file is the whole bridge: load a method of a program
// (`forward`, or a component's: `prefill`, `decode`), read its metadata, bind inputs and outputs
// to the caller's memory, execute, read outputs. Handles opened with `hfx_et_open_sibling` load
// another method of the same program (one `Module`: the file and its named data loaded once),
// each method with its own planned memory.
//
// Inputs are wrapped without a copy (`make_tensor_ptr` over the caller's pointer): an input the
// program does not memory-plan shares the caller's buffer, a planned one is copied into the
// arena by `Method::set_input`. `hfx_et_set_output` is `Method::set_output_data_ptr`.
// Every function returns 0 on success, else writes a message into `err`.

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/runtime.h>

#include <dlfcn.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::extension::make_tensor_ptr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;

// A program and the methods handles hold (a method is held by one handle at a time).
struct HfxProgram {
  std::unique_ptr<Module> module;
  std::set<std::string> held;
};

struct HfxEt {
  std::shared_ptr<HfxProgram> program;
  std::string name;
  Method* method = nullptr;
  std::vector<TensorPtr> inputs;
  ~HfxEt() {
    if (program) program->held.erase(name);
  }
};

static int fail(char* err, size_t n, const char* what, Error e) {
  if (err && n) snprintf(err, n, "%s (ExecuTorch error 0x%x)", what, static_cast<unsigned>(e));
  return 1;
}

// Loads the optimized/portable kernel library and the XNNPACK backend that sit beside
// libexecutorch.so; their static constructors register the kernels and the backend.
static bool load_kernels(char* err, size_t n) {
  static bool loaded = false;
  if (loaded) return true;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&executorch::runtime::runtime_init), &info) || !info.dli_fname) {
    if (err && n) snprintf(err, n, "cannot locate libexecutorch.so");
    return false;
  }
  std::string dir(info.dli_fname);
  dir = dir.substr(0, dir.rfind('/') + 1);
  for (const char* lib : {"libexecutorch_kernels_optimized.so", "libexecutorch_backend_xnnpack.so"}) {
    std::string p = dir + lib;
    if (!dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      if (err && n) snprintf(err, n, "cannot load %s: %s", p.c_str(), dlerror());
      return false;
    }
  }
  loaded = true;
  return true;
}

static HfxEt* open_method(std::shared_ptr<HfxProgram> program, const char* method, char* err, size_t n) {
  std::string name(method);
  if (program->held.count(name)) {
    snprintf(err, n, "the method `%s` is already open on this program", method);
    return nullptr;
  }
  Error e = program->module->load_method(name);
  if (e != Error::Ok) {
    snprintf(err, n, "cannot load the method `%s` (ExecuTorch error 0x%x)", method, static_cast<unsigned>(e));
    return nullptr;
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto m = program->module->method(name);
#pragma GCC diagnostic pop
  if (!m.ok()) {
    snprintf(err, n, "cannot get the method `%s` (ExecuTorch error 0x%x)", method, static_cast<unsigned>(m.error()));
    return nullptr;
  }
  auto h = std::make_unique<HfxEt>();
  h->method = m.get();
  h->inputs.resize(h->method->inputs_size());
  h->name = name;
  program->held.insert(name);
  h->program = std::move(program);
  return h.release();
}

extern "C" {

// Loads method `method` of the program at `path`.
HfxEt* hfx_et_open(const char* path, const char* method, char* err, size_t n) {
  executorch::runtime::runtime_init();
  if (!load_kernels(err, n)) return nullptr;
  auto program = std::make_shared<HfxProgram>();
  program->module = std::make_unique<Module>(path, Module::LoadMode::Mmap);
  return open_method(std::move(program), method, err, n);
}

// Loads method `method` of the program `h` holds (the program stays loaded while any of its
// handles is open).
HfxEt* hfx_et_open_sibling(const HfxEt* h, const char* method, char* err, size_t n) {
  return open_method(h->program, method, err, n);
}

void hfx_et_close(HfxEt* h) { delete h; }

size_t hfx_et_num_inputs(const HfxEt* h) { return h->method->inputs_size(); }

size_t hfx_et_num_outputs(const HfxEt* h) { return h->method->outputs_size(); }

// The tensor metadata of input (`output` = 0) or output (`output` = 1) `i`: dtype, upper-bound
// sizes (at most `cap`), whether the program plans its memory.
int hfx_et_meta(const HfxEt* h, int output, size_t i, int8_t* dtype, int64_t* sizes, size_t cap, size_t* rank,
                int* planned, char* err, size_t n) {
  auto meta = h->method->method_meta();
  auto info = output ? meta.output_tensor_meta(i) : meta.input_tensor_meta(i);
  if (!info.ok()) return fail(err, n, "no tensor metadata", info.error());
  auto s = info->sizes();
  *rank = s.size();
  for (size_t d = 0; d < s.size() && d < cap; d++) sizes[d] = s[d];
  *dtype = static_cast<int8_t>(info->scalar_type());
  *planned = info->is_memory_planned() ? 1 : 0;
  return 0;
}

int hfx_et_set_input(HfxEt* h, size_t i, void* data, int8_t dtype, const int64_t* sizes, size_t rank, char* err,
                     size_t n) {
  if (i >= h->inputs.size()) return fail(err, n, "no such input", Error::InvalidArgument);
  std::vector<SizesType> s(sizes, sizes + rank);
  h->inputs[i] = make_tensor_ptr(std::move(s), data, static_cast<ScalarType>(dtype));
  Error e = h->method->set_input(EValue(*h->inputs[i]), i);
  if (e != Error::Ok) return fail(err, n, "set_input refused the tensor (dtype, rank or a size past its bound?)", e);
  return 0;
}

int hfx_et_set_output(HfxEt* h, size_t i, void* data, size_t nbytes, char* err, size_t n) {
  Error e = h->method->set_output_data_ptr(data, nbytes, i);
  if (e != Error::Ok) return fail(err, n, "set_output_data_ptr refused the buffer", e);
  return 0;
}

int hfx_et_execute(HfxEt* h, char* err, size_t n) {
  Error e = h->method->execute();
  if (e != Error::Ok) return fail(err, n, "execute failed", e);
  return 0;
}

// Output `i` after execute: its data, dtype and current sizes (at most `cap`).
int hfx_et_output(const HfxEt* h, size_t i, const void** data, int8_t* dtype, int64_t* sizes, size_t cap,
                  size_t* rank, char* err, size_t n) {
  const EValue& v = h->method->get_output(i);
  if (!v.isTensor()) return fail(err, n, "the output is not a tensor", Error::InvalidArgument);
  const auto& t = v.toTensor();
  *data = t.const_data_ptr();
  *dtype = static_cast<int8_t>(t.scalar_type());
  *rank = t.dim();
  for (size_t d = 0; d < static_cast<size_t>(t.dim()) && d < cap; d++) sizes[d] = t.size(d);
  return 0;
}

}  // extern "C"
