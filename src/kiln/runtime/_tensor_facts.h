/* The table _tensor_facts.cpp hands _guard_plan.c (in a capsule): plain C types only. */
#ifndef KILN_TENSOR_FACTS_H
#define KILN_TENSOR_FACTS_H
#include <stdint.h>

#define KILN_MAX_DIMS 16
#define KILN_TENSOR_FACTS_CAPSULE "kiln._tensor_facts.api"

typedef struct {
    int scalar_type, device_type, device_index, requires_grad;
    int64_t ndim;
    int64_t sizes[KILN_MAX_DIMS], strides[KILN_MAX_DIMS];
} KilnTensorFacts;

typedef struct {
    int (*plain)(PyObject *v);     /* 1: torch would not hand the reads to __torch_function__ */
    int (*facts)(PyObject *v, KilnTensorFacts *out, int want_strides);   /* 0 done, -1 unknown */
    int (*dtype_code)(PyObject *dtype);                                /* -1: not a torch.dtype */
    int (*device_code)(PyObject *device, int *type, int *index);       /* -1: not a torch.device */
    int cpu_device_type;
} KilnTensorFactsAPI;

#endif
