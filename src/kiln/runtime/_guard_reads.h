/* Part of _guard_plan.c (one translation unit, included once): attribute reads as
 * Python's, cached by type version.  Kept apart so that file stays readable. */
/* An attribute read's cache: for objects of ``type`` while its version tag is ``tag``
 * (CPython changes a type's tag whenever its dict or a base's changes), where Python's
 * generic lookup finds the attribute: a data descriptor on the type (``descr``, called
 * directly), else the instance dict, then the class.  Filled after a generic read. */
enum { A_NONE = 0, A_DESCR = 1, A_DICT = 2, A_DICT_THEN_CLASS = 3 };
typedef struct {
    PyTypeObject *type;
    unsigned int tag;
    int mode, misses;
    PyObject *descr;
} AttrCache;

#define N_ATTR_CACHES 6   /* a tensor check reads dtype, is_cpu/device, requires_grad, shape, stride */

static PyObject *s_dtype, *s_is_cpu, *s_device, *s_requires_grad, *s_shape, *s_stride, *s_dict, *s_getattribute;
static const KilnTensorFactsAPI *tf_api;   /* _tensor_facts.cpp's table, once loaded */
static PyObject *tensor_base;              /* torch._C.TensorBase */
static PyObject *s_facts_names[6];
static getattrofunc hook_getattro;      /* what a Python class with __getattr__ gets as tp_getattro */
static PyObject *object_getattribute;   /* object.__getattribute__ */

/* -- attribute reads, cached by type version ------------------------------------------ */

/* Whether ``tp``'s attribute lookup is Python's generic one (possibly followed by a
 * __getattr__ hook, which only runs where the generic lookup fails), and if so fill the
 * cache for ``name``. */
static void attr_classify(AttrCache *c, PyTypeObject *tp, PyObject *name) {
    if (++c->misses > 8) return;             /* a site that sees many types stays generic */
    if (tp->tp_getattro != PyObject_GenericGetAttr &&
        !(hook_getattro && tp->tp_getattro == hook_getattro && _PyType_Lookup(tp, s_getattribute) == object_getattribute))
        return;
    PyObject *d = _PyType_Lookup(tp, name);  /* also gives the type a valid version tag */
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) || tp->tp_version_tag == 0) return;
    Py_INCREF(tp);
    Py_XSETREF(c->type, tp);
    c->tag = tp->tp_version_tag;
    Py_XINCREF(d);
    Py_XSETREF(c->descr, d);
    if (d && Py_TYPE(d)->tp_descr_get && Py_TYPE(d)->tp_descr_set) c->mode = A_DESCR;
    else c->mode = d ? A_DICT_THEN_CLASS : A_DICT;
}

/* ``getattr(obj, name)``, exactly as Python's, without the lookup where the cache holds */
static PyObject *fast_getattr(AttrCache *c, PyObject *obj, PyObject *name) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (c->type == tp && tp->tp_version_tag == c->tag && c->mode != A_NONE) {
        PyObject *d = c->descr;
        if (c->mode == A_DESCR) {
            /* held: a getter that changes the type re-fills this cache while it runs */
            Py_INCREF(d);
            PyObject *v = Py_TYPE(d)->tp_descr_get(d, obj, (PyObject *)tp);
            Py_DECREF(d);
            return v;
        }
        PyObject **dp = _PyObject_GetDictPtr(obj);
        if (dp && *dp) {
            PyObject *v = PyDict_GetItemWithError(*dp, name);
            if (v) return Py_NewRef(v);
            if (PyErr_Occurred()) return NULL;
        }
        if (c->mode == A_DICT_THEN_CLASS) {
            descrgetfunc f = Py_TYPE(d)->tp_descr_get;
            if (!f) return Py_NewRef(d);
            Py_INCREF(d);
            PyObject *v = f(d, obj, (PyObject *)tp);
            Py_DECREF(d);
            return v;
        }
        return PyObject_GetAttr(obj, name);  /* not found: the error or __getattr__, as Python */
    }
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v) attr_classify(c, tp, name);
    return v;
}

/* ``obj.name()`` for a method found on the class (the instance dict is checked first, as
 * Python's method lookup does); else the generic call */
static PyObject *fast_call_method(AttrCache *c, PyObject *obj, PyObject *name) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (c->type == tp && tp->tp_version_tag == c->tag && c->mode == A_DICT_THEN_CLASS &&
        PyObject_TypeCheck(c->descr, &PyMethodDescr_Type)) {
        PyObject **dp = _PyObject_GetDictPtr(obj);
        int shadowed = 0;
        if (dp && *dp) {
            shadowed = PyDict_Contains(*dp, name);
            if (shadowed < 0) return NULL;
        }
        if (!shadowed) {
            PyObject *d = Py_NewRef(c->descr), *v = PyObject_Vectorcall(d, &obj, 1, NULL);
            Py_DECREF(d);
            return v;
        }
    }
    PyObject *argv[1] = {obj};
    PyObject *v = PyObject_VectorcallMethod(name, argv, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (v && c->type != tp) attr_classify(c, tp, name);
    return v;
}
