/* Part of _guard_plan.c (one translation unit, included once, after Op): the tensor
 * check, from the tensor's attributes or, where _tensor_facts.cpp is loaded and may stand
 * in for them, from the at::Tensor. */
/* the positional entries of a shape/stride against the expected ones: 1 equal, 0 not, -1 error */
static int dims_match(PyObject *got, PyObject *whole, Py_ssize_t n, const Py_ssize_t *vals) {
    if (whole != NULL) {
        /* ``got == (3, 4)``: a torch.Size (tuple) against a tuple */
        PyObject *r = PyObject_RichCompare(got, whole, Py_EQ);
        if (!r) return -1;
        int ok = PyObject_IsTrue(r);
        Py_DECREF(r);
        return ok;
    }
    /* ``len(got) == n and got[i] == c ...`` for the static entries */
    Py_ssize_t len = PyObject_Length(got);
    if (len < 0) return -1;
    if (len != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (vals[i] == SYMBOLIC) continue;
        PyObject *item = PySequence_GetItem(got, i);
        if (!item) return -1;
        int ok;
        if (PyLong_CheckExact(item)) {
            Py_ssize_t v = PyLong_AsSsize_t(item);
            ok = (v == -1 && PyErr_Occurred()) ? -1 : v == vals[i];
            if (ok < 0 && PyErr_ExceptionMatches(PyExc_OverflowError)) { PyErr_Clear(); ok = 0; }
        } else {
            PyObject *c = PyLong_FromSsize_t(vals[i]);
            ok = c ? PyObject_RichCompareBool(item, c, Py_EQ) : -1;
            Py_XDECREF(c);
        }
        Py_DECREF(item);
        if (ok <= 0) return ok;
    }
    return 1;
}

/* Whether the tensor-facts table may stand in for this step's attribute reads on its
 * type: the type resolves each of them to TensorBase's own descriptor (under its
 * version tag), and the expected dtype and device have codes. */
static int facts_usable(Op *op) {
    PyTypeObject *tp = (PyTypeObject *)op->o1;
    if (op->ft_state == 1 && tp->tp_version_tag == op->ft_tag) return 1;
    if (op->ft_state == -1 || ++op->ft_tries > 4) return 0;
    op->ft_state = -1;
    for (int i = 0; i < 6; i++) {
        PyObject *mine = _PyType_Lookup(tp, s_facts_names[i]);
        if (!mine || mine != _PyType_Lookup((PyTypeObject *)tensor_base, s_facts_names[i])) return 0;
    }
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) || tp->tp_version_tag == 0) return 0;
    op->ft_dtype = tf_api->dtype_code(op->o2);
    if (op->ft_dtype < 0) return 0;
    if (op->o3 != Py_None && tf_api->device_code(op->o3, &op->ft_dev_type, &op->ft_dev_index) < 0) return 0;
    op->ft_tag = tp->tp_version_tag;
    op->ft_state = 1;
    return 1;
}

static int facts_dims_match(const int64_t *got, Py_ssize_t ndim, Py_ssize_t n, const Py_ssize_t *vals) {
    if (ndim != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (vals[i] != SYMBOLIC && got[i] != vals[i]) return 0;
    return 1;
}

/* The tensor check from the tensor's own metadata: 1 pass, 0 fail, -1 unknown (read the
 * attributes instead). */
static int check_tensor_facts(Op *op, PyObject *v) {
    if (tf_api->plain(v) != 1) return -1;
    if (op->nstrides >= 0) {
        /* ``stride`` is a method: an instance attribute of that name would shadow it */
        PyObject **dp = _PyObject_GetDictPtr(v);
        if (dp && *dp && PyDict_GET_SIZE(*dp)) {
            PyObject *own = PyDict_GetItemWithError(*dp, s_stride);
            if (own || PyErr_Occurred()) { PyErr_Clear(); return -1; }
        }
    }
    KilnTensorFacts f;
    if (tf_api->facts(v, &f, op->nstrides >= 0) != 0) return -1;
    if (f.scalar_type != op->ft_dtype) return 0;
    if (op->o3 == Py_None ? f.device_type != tf_api->cpu_device_type
                          : f.device_type != op->ft_dev_type || f.device_index != op->ft_dev_index)
        return 0;
    if (f.requires_grad != op->flag) return 0;
    if (op->nsizes >= 0 && !facts_dims_match(f.sizes, f.ndim, op->nsizes, op->size_vals)) return 0;
    if (op->nstrides >= 0 && !facts_dims_match(f.strides, f.ndim, op->nstrides, op->stride_vals)) return 0;
    return 1;
}

/* 1 pass, 0 fail, -1 error */
static int check_tensor(Op *op, PyObject *v) {
    if ((PyObject *)Py_TYPE(v) != op->o1) return 0;
    if (tf_api && facts_usable(op)) {
        int known = check_tensor_facts(op, v);
        if (known >= 0) return known;
    }
    PyObject *x = fast_getattr(&op->ac[0], v, s_dtype);
    if (!x) return -1;
    int ok = x == op->o2;
    Py_DECREF(x);
    if (!ok) return 0;
    if (op->o3 == Py_None) {
        x = fast_getattr(&op->ac[1], v, s_is_cpu);
        if (!x) return -1;
        ok = PyObject_IsTrue(x);
    } else {
        x = fast_getattr(&op->ac[1], v, s_device);
        if (!x) return -1;
        PyObject *r = PyObject_RichCompare(x, op->o3, Py_EQ);
        ok = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
    }
    Py_DECREF(x);
    if (ok <= 0) return ok;
    x = fast_getattr(&op->ac[2], v, s_requires_grad);
    if (!x) return -1;
    ok = x == (op->flag ? Py_True : Py_False);
    Py_DECREF(x);
    if (!ok) return 0;
    if (op->nsizes >= 0) {
        x = fast_getattr(&op->ac[3], v, s_shape);
        if (!x) return -1;
        ok = dims_match(x, op->sizes, op->nsizes, op->size_vals);
        Py_DECREF(x);
        if (ok <= 0) return ok;
    }
    if (op->nstrides >= 0) {
        x = fast_call_method(&op->ac[4], v, s_stride);
        if (!x) return -1;
        ok = dims_match(x, op->strides, op->nstrides, op->stride_vals);
        Py_DECREF(x);
        if (ok <= 0) return ok;
    }
    return 1;
}
