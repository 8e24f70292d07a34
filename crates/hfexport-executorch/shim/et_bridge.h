// The C++ half of the `#[cxx::bridge]` in src/runtime.rs: the ExecuTorch 1.5.1 runtime (the
// wheel's libexecutorch.so and its kernel and backend libraries) for hfexport-executorch's
// `runtime` feature. The wheel ships C++ headers and shared libraries but no C API; this type
// is the whole bridge: load a method of a program (`forward`, or a component's: `prefill`,
// `decode`), read its metadata, bind inputs and outputs to the caller's memory, execute, read
// outputs. A method opened with `sibling` is another method of the same program (one `Module`:
// the file and its named data loaded once), with its own planned memory.
//
// A failing ExecuTorch call throws `std::runtime_error` with the call, what it refused and the
// `Error` code; cxx turns it into `Err(cxx::Exception)` on the Rust side.

#pragma once

#include "rust/cxx.h"

#include <executorch/runtime/executor/method.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hfx {

struct TensorMeta;
struct HfxProgram;

class HfxMethod {
 public:
  HfxMethod(std::shared_ptr<HfxProgram> program, rust::Str name, executorch::runtime::Method* method);
  ~HfxMethod();
  HfxMethod(const HfxMethod&) = delete;
  HfxMethod& operator=(const HfxMethod&) = delete;

  // Another method of this program (the program stays loaded while any of its methods lives).
  std::unique_ptr<HfxMethod> sibling(rust::Str method) const;
  size_t num_inputs() const;
  size_t num_outputs() const;
  // The metadata of input (`output` false) or output `i`: dtype, upper-bound sizes, whether
  // the program plans its memory.
  TensorMeta meta(bool output, size_t i) const;
  // Wraps `data` without a copy (`make_tensor_ptr`): an unplanned input shares the caller's
  // buffer, a planned one is copied into the arena by `Method::set_input`.
  void set_input(size_t i, uint8_t* data, int8_t dtype, rust::Slice<const int64_t> sizes);
  // `Method::set_output_data_ptr`.
  void set_output(size_t i, uint8_t* data, size_t nbytes);
  void execute();
  // Output `i` after an execute: its dtype and current sizes (`planned` unused), and its data.
  TensorMeta output_meta(size_t i) const;
  const uint8_t* output_data(size_t i) const;

 private:
  std::shared_ptr<HfxProgram> program_;
  std::string name_;
  executorch::runtime::Method* method_;
  std::vector<std::shared_ptr<void>> inputs_;  // the TensorPtrs bound as inputs
};

// Loads method `method` of the program at `path` (bytes of the path, no NUL).
std::unique_ptr<HfxMethod> open_method(rust::Slice<const uint8_t> path, rust::Str method);

}  // namespace hfx
