// Kiln's tensor facts: the metadata a tensor guard checks, read from the tensor itself.
//
// The guard accelerator (_guard_plan.c, plain C) checks a tensor by reading the
// attributes the Python guard reads (dtype, is_cpu/device, requires_grad, shape,
// stride()).  Each read makes a Python object; this small C++ part reads the same facts
// from the at::Tensor behind the Python object instead.  It is used only where those
// attribute reads are torch's own getters (the plan checks the tensor's type resolves
// them to torch._C.TensorBase's, under the type's version tag) and where torch would
// not dispatch them to __torch_function__: no torch-function mode is on and the tensor
// is exactly a torch.Tensor or nn.Parameter (what torch's check_has_torch_function
// lets through without looking further; any other type reads the attributes), so it
// returns what the reads would.  Anything unexpected (a C++ exception: a nested
// tensor's sizes) answers "unknown", and the plan reads the attributes after all.
//
// Built on first use against torch's headers by runtime/native.py, optional: without it
// the plans read the attributes.  It hands _guard_plan.c a table of functions in a
// capsule, so the C module needs no C++.
#include <Python.h>

#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <ATen/PythonTorchFunctionTLS.h>

#include "_tensor_facts.h"

namespace {

int plain(PyObject* v) {
  if (!THPVariable_CheckTypeExact(Py_TYPE(v))) return 0;
  return at::impl::torch_function_mode_enabled() ? 0 : 1;
}

int facts(PyObject* v, KilnTensorFacts* out, int want_strides) {
  try {
    const at::Tensor& t = THPVariable_Unpack(v);
    out->scalar_type = static_cast<int>(t.scalar_type());
    at::Device d = t.device();
    out->device_type = static_cast<int>(d.type());
    out->device_index = d.index();
    out->requires_grad = t.requires_grad();
    int64_t n = t.dim();
    if (n > KILN_MAX_DIMS) return -1;
    out->ndim = n;
    auto sizes = t.sizes();
    for (int64_t i = 0; i < n; i++) out->sizes[i] = sizes[i];
    if (want_strides) {
      auto strides = t.strides();
      for (int64_t i = 0; i < n; i++) out->strides[i] = strides[i];
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

int dtype_code(PyObject* dtype) {
  if (!THPDtype_Check(dtype)) return -1;
  return static_cast<int>(reinterpret_cast<THPDtype*>(dtype)->scalar_type);
}

int device_code(PyObject* device, int* type, int* index) {
  if (!THPDevice_Check(device)) return -1;
  const at::Device& d = reinterpret_cast<THPDevice*>(device)->device;
  *type = static_cast<int>(d.type());
  *index = d.index();
  return 0;
}

KilnTensorFactsAPI api = {plain, facts, dtype_code, device_code, static_cast<int>(at::DeviceType::CPU)};

PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_tensor_facts", "Kiln's tensor facts (see _tensor_facts.cpp).", -1,
                         nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__tensor_facts(void) {
  PyObject* m = PyModule_Create(&moduledef);
  if (!m) return nullptr;
  PyObject* capsule = PyCapsule_New(&api, KILN_TENSOR_FACTS_CAPSULE, nullptr);
  if (!capsule || PyModule_AddObject(m, "api", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
