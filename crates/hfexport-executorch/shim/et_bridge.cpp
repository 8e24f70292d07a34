// The ExecuTorch side of the `#[cxx::bridge]` in src/runtime.rs; see et_bridge.h.
//
// Inputs are wrapped without a copy (`make_tensor_ptr` over the caller's pointer): an input the
// program does not memory-plan shares the caller's buffer, a planned one is copied into the
// arena by `Method::set_input`. `set_output` is `Method::set_output_data_ptr`.

#include "hfexport-executorch/shim/et_bridge.h"
#include "hfexport-executorch/src/runtime.rs.h"

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/runtime.h>

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::extension::Module;
using executorch::extension::make_tensor_ptr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;

namespace hfx {

// A program and the methods open on it (a method is held by one `HfxMethod` at a time).
struct HfxProgram {
  std::unique_ptr<Module> module;
  std::set<std::string> held;
};

[[noreturn]] static void fail(const std::string& what, Error e) {
  char code[32];
  snprintf(code, sizeof code, "0x%x", static_cast<unsigned>(e));
  throw std::runtime_error(what + " (ExecuTorch error " + code + ")");
}

// Loads the optimized/portable kernel library and the XNNPACK backend that sit beside
// libexecutorch.so; their static constructors register the kernels and the backend.
static void load_kernels() {
  static std::mutex mu;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&executorch::runtime::runtime_init), &info) || !info.dli_fname) {
    throw std::runtime_error("cannot locate libexecutorch.so");
  }
  std::string dir(info.dli_fname);
  dir = dir.substr(0, dir.rfind('/') + 1);
  for (const char* lib : {"libexecutorch_kernels_optimized.so", "libexecutorch_backend_xnnpack.so"}) {
    std::string p = dir + lib;
    if (!dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      throw std::runtime_error("cannot load " + p + ": " + dlerror());
    }
  }
  loaded = true;
}

static std::unique_ptr<HfxMethod> load(std::shared_ptr<HfxProgram> program, rust::Str method) {
  std::string name(method);
  if (program->held.count(name)) {
    throw std::runtime_error("the method `" + name + "` is already open on this program");
  }
  Error e = program->module->load_method(name);
  if (e != Error::Ok) fail("cannot load the method `" + name + "`", e);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto m = program->module->method(name);
#pragma GCC diagnostic pop
  if (!m.ok()) fail("cannot get the method `" + name + "`", m.error());
  return std::make_unique<HfxMethod>(std::move(program), method, m.get());
}

std::unique_ptr<HfxMethod> open_method(rust::Slice<const uint8_t> path, rust::Str method) {
  executorch::runtime::runtime_init();
  load_kernels();
  auto program = std::make_shared<HfxProgram>();
  std::string p(reinterpret_cast<const char*>(path.data()), path.size());
  program->module = std::make_unique<Module>(p, Module::LoadMode::Mmap);
  return load(std::move(program), method);
}

HfxMethod::HfxMethod(std::shared_ptr<HfxProgram> program, rust::Str name, Method* method)
    : program_(std::move(program)), name_(name), method_(method), inputs_(method->inputs_size()) {
  program_->held.insert(name_);
}

HfxMethod::~HfxMethod() { program_->held.erase(name_); }

std::unique_ptr<HfxMethod> HfxMethod::sibling(rust::Str method) const { return load(program_, method); }

size_t HfxMethod::num_inputs() const { return method_->inputs_size(); }

size_t HfxMethod::num_outputs() const { return method_->outputs_size(); }

TensorMeta HfxMethod::meta(bool output, size_t i) const {
  auto meta = method_->method_meta();
  auto info = output ? meta.output_tensor_meta(i) : meta.input_tensor_meta(i);
  if (!info.ok()) fail("no tensor metadata", info.error());
  TensorMeta out;
  for (auto d : info->sizes()) out.sizes.push_back(d);
  out.dtype = static_cast<int8_t>(info->scalar_type());
  out.planned = info->is_memory_planned();
  return out;
}

void HfxMethod::set_input(size_t i, uint8_t* data, int8_t dtype, rust::Slice<const int64_t> sizes) {
  if (i >= inputs_.size()) fail("no such input", Error::InvalidArgument);
  std::vector<SizesType> s(sizes.begin(), sizes.end());
  auto t = make_tensor_ptr(std::move(s), data, static_cast<ScalarType>(dtype));
  Error e = method_->set_input(EValue(*t), i);
  inputs_[i] = std::move(t);
  if (e != Error::Ok) fail("set_input refused the tensor (dtype, rank or a size past its bound?)", e);
}

void HfxMethod::set_output(size_t i, uint8_t* data, size_t nbytes) {
  Error e = method_->set_output_data_ptr(data, nbytes, i);
  if (e != Error::Ok) fail("set_output_data_ptr refused the buffer", e);
}

void HfxMethod::execute() {
  Error e = method_->execute();
  if (e != Error::Ok) fail("execute failed", e);
}

static const executorch::aten::Tensor& output_tensor(const Method* m, size_t i) {
  if (i >= m->outputs_size()) fail("no such output", Error::InvalidArgument);
  const EValue& v = m->get_output(i);
  if (!v.isTensor()) fail("the output is not a tensor", Error::InvalidArgument);
  return v.toTensor();
}

TensorMeta HfxMethod::output_meta(size_t i) const {
  const auto& t = output_tensor(method_, i);
  TensorMeta out;
  for (ssize_t d = 0; d < t.dim(); d++) out.sizes.push_back(t.size(d));
  out.dtype = static_cast<int8_t>(t.scalar_type());
  out.planned = false;
  return out;
}

const uint8_t* HfxMethod::output_data(size_t i) const {
  return static_cast<const uint8_t*>(output_tensor(method_, i).const_data_ptr());
}

}  // namespace hfx
