/* Kiln's guard accelerator: runs a compiled guard plan.
 *
 * A plan is the list of steps the generated Python guard function performs, in its
 * order (capture/guards.py: GuardCodegen.plan): bind the frame's arguments into slots,
 * read sources into further slots (attribute, item, constant, or a Python callable for
 * rarer source kinds), check facts about slot values (identity, type, equality, length,
 * tensor metadata, ...; a Python callable for guards the plan has no step for), and
 * return the handed-off slots.  The Python guard function is the specification: this
 * file takes the same decisions by performing the same Python-level operations
 * (attribute reads through PyObject_GetAttr, comparisons through PyObject_RichCompare),
 * only without the interpreter loop.  Any exception that is an Exception means False,
 * as the Python guard's ``except Exception: return False``; a call whose arguments do
 * not bind the simple way is delegated to the Python guard itself.
 *
 * Plain C against the CPython API (3.11-3.13), no torch headers: tensor metadata is
 * read through the tensor's Python attributes, or from the at::Tensor by the optional
 * C++ part (_tensor_facts.cpp).  Attribute reads are in _guard_reads.h, the tensor check
 * in _guard_tensors.h (parts of this file).  Built on first use by runtime/native.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "_tensor_facts.h"

enum {
    L_ATTR = 0, L_ITEM = 1, L_CONST = 2, L_CALL = 3,
    C_IS = 10, C_TYPE = 11, C_EQ = 12, C_LEN = 13, C_TENSOR = 14, C_SAME = 15, C_ATTR_IS = 16,
    C_FALSY_ATTRS = 17, C_IN_DICT = 18, C_IN = 19, C_HASATTR = 20, C_TRUTH = 21, C_CALL_IS = 22,
    C_CALL_EQ = 23, C_METHOD_IS = 24, C_KEYS = 25, C_PY = 26,
};

#include "_guard_reads.h"

typedef struct {
    int code;
    AttrCache ac[N_ATTR_CACHES];
    Py_ssize_t a, b;          /* slots (dst/src) */
    PyObject *o1, *o2, *o3;   /* owned operands */
    int flag;                 /* want / requires_grad */
    Py_ssize_t nsizes, nstrides;  /* -1: not checked */
    PyObject *sizes, *strides;    /* tuples of ints, compared whole, when every entry is static */
    Py_ssize_t *size_vals, *stride_vals;  /* per-entry values; INT_MIN-like sentinel = symbolic */
    Py_ssize_t *srcs; Py_ssize_t nsrcs;   /* L_CALL / C_PY argument slots */
    /* C_TENSOR with tensor facts: 0 not yet looked at, 1 usable while the type's tag is
     * ft_tag, -1 not usable (the type's reads are not torch's own getters) */
    int ft_state, ft_tries, ft_dtype, ft_dev_type, ft_dev_index;
    unsigned int ft_tag;
} Op;

#define SYMBOLIC PY_SSIZE_T_MIN

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback;       /* the generated Python guard function */
    Py_ssize_t npos;          /* positional parameters, ___fn included */
    Py_ssize_t nposonly;      /* of them, positional-only (0 when none) */
    Py_ssize_t nkwonly;
    int varargs, varkw;
    PyObject *names;          /* tuple: positional then keyword-only parameter names */
    PyObject *defaults;       /* tuple or NULL */
    PyObject *kwdefaults;     /* dict or NULL */
    Py_ssize_t nslots;
    Py_ssize_t nops;
    Op *ops;
    Py_ssize_t nhandoff;      /* -1: return True */
    Py_ssize_t *handoff;
} Plan;

static void op_clear(Op *op) {
    for (int i = 0; i < N_ATTR_CACHES; i++) { Py_CLEAR(op->ac[i].type); Py_CLEAR(op->ac[i].descr); }
    Py_CLEAR(op->o1); Py_CLEAR(op->o2); Py_CLEAR(op->o3);
    Py_CLEAR(op->sizes); Py_CLEAR(op->strides);
    PyMem_Free(op->size_vals); op->size_vals = NULL;
    PyMem_Free(op->stride_vals); op->stride_vals = NULL;
    PyMem_Free(op->srcs); op->srcs = NULL;
}

static int plan_traverse(Plan *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback); Py_VISIT(self->names); Py_VISIT(self->defaults); Py_VISIT(self->kwdefaults);
    for (Py_ssize_t i = 0; i < self->nops; i++) {
        Py_VISIT(self->ops[i].o1); Py_VISIT(self->ops[i].o2); Py_VISIT(self->ops[i].o3);
    }
    return 0;
}

static int plan_clear(Plan *self) {
    Py_CLEAR(self->fallback); Py_CLEAR(self->names); Py_CLEAR(self->defaults); Py_CLEAR(self->kwdefaults);
    if (self->ops) {
        for (Py_ssize_t i = 0; i < self->nops; i++) op_clear(&self->ops[i]);
        PyMem_Free(self->ops); self->ops = NULL;
    }
    self->nops = 0;
    PyMem_Free(self->handoff); self->handoff = NULL;
    return 0;
}

static void plan_dealloc(Plan *self) {
    PyObject_GC_UnTrack(self);
    plan_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* -- building a plan from its Python description ---------------------------------- */

static int get_slot(PyObject *t, Py_ssize_t i, Py_ssize_t nslots, Py_ssize_t *out) {
    Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= nslots) { PyErr_Format(PyExc_ValueError, "guard plan: slot %zd out of range", v); return -1; }
    *out = v;
    return 0;
}

static int slot_list(PyObject *seq, Py_ssize_t nslots, Py_ssize_t **out, Py_ssize_t *n) {
    if (!PyTuple_Check(seq)) { PyErr_SetString(PyExc_TypeError, "guard plan: slots must be a tuple"); return -1; }
    *n = PyTuple_GET_SIZE(seq);
    *out = PyMem_Malloc(sizeof(Py_ssize_t) * (*n + 1));
    if (!*out) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < *n; i++)
        if (get_slot(seq, i, nslots, &(*out)[i]) < 0) return -1;
    return 0;
}

/* entries: a tuple of ints and Nones (None: symbolic, not checked here) */
static int dims(PyObject *entries, Py_ssize_t *n, Py_ssize_t **vals, PyObject **whole) {
    if (entries == Py_None) { *n = -1; return 0; }
    if (!PyTuple_Check(entries)) { PyErr_SetString(PyExc_TypeError, "guard plan: dims must be a tuple"); return -1; }
    *n = PyTuple_GET_SIZE(entries);
    *vals = PyMem_Malloc(sizeof(Py_ssize_t) * (*n + 1));
    if (!*vals) { PyErr_NoMemory(); return -1; }
    int all_static = 1;
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *e = PyTuple_GET_ITEM(entries, i);
        if (e == Py_None) { (*vals)[i] = SYMBOLIC; all_static = 0; continue; }
        (*vals)[i] = PyLong_AsSsize_t(e);
        if ((*vals)[i] == -1 && PyErr_Occurred()) return -1;
    }
    if (all_static) { Py_INCREF(entries); *whole = entries; }
    return 0;
}

static int build_op(Op *op, PyObject *t, Py_ssize_t nslots) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2) {
        PyErr_SetString(PyExc_TypeError, "guard plan: each step is a tuple (code, ...)");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    op->code = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    if (op->code == -1 && PyErr_Occurred()) return -1;
#define OBJ(field, i) do { if ((i) >= n) goto short_; op->field = PyTuple_GET_ITEM(t, i); Py_INCREF(op->field); } while (0)
#define SLOT(field, i) do { if ((i) >= n) goto short_; if (get_slot(t, i, nslots, &op->field) < 0) return -1; } while (0)
#define FLAG(i) do { if ((i) >= n) goto short_; op->flag = PyObject_IsTrue(PyTuple_GET_ITEM(t, i)); if (op->flag < 0) return -1; } while (0)
    switch (op->code) {
    case L_ATTR: case L_ITEM: SLOT(a, 1); SLOT(b, 2); OBJ(o1, 3); break;
    case L_CONST: SLOT(a, 1); OBJ(o1, 2); break;
    case L_CALL:
        SLOT(a, 1); OBJ(o1, 2);
        if (n < 4 || slot_list(PyTuple_GET_ITEM(t, 3), nslots, &op->srcs, &op->nsrcs) < 0) goto bad;
        break;
    case C_IS: case C_TYPE: case C_EQ: SLOT(a, 1); OBJ(o1, 2); break;
    case C_LEN: SLOT(a, 1); if (n < 3) goto short_;
        op->nsizes = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2)); if (op->nsizes == -1 && PyErr_Occurred()) return -1;
        break;
    case C_TENSOR:
        if (n < 8) goto short_;
        SLOT(a, 1); OBJ(o1, 2); OBJ(o2, 3); OBJ(o3, 4); FLAG(5);
        if (dims(PyTuple_GET_ITEM(t, 6), &op->nsizes, &op->size_vals, &op->sizes) < 0) return -1;
        if (dims(PyTuple_GET_ITEM(t, 7), &op->nstrides, &op->stride_vals, &op->strides) < 0) return -1;
        break;
    case C_SAME: SLOT(a, 1); SLOT(b, 2); break;
    case C_ATTR_IS: case C_METHOD_IS: SLOT(a, 1); OBJ(o1, 2); OBJ(o2, 3); break;
    case C_FALSY_ATTRS: SLOT(a, 1); OBJ(o1, 2); if (!PyTuple_Check(op->o1)) goto bad; break;
    case C_IN_DICT: case C_IN: case C_HASATTR: SLOT(a, 1); OBJ(o1, 2); FLAG(3); break;
    case C_TRUTH: SLOT(a, 1); FLAG(2); break;
    case C_CALL_IS: case C_CALL_EQ: OBJ(o1, 1); OBJ(o2, 2); break;
    case C_KEYS: SLOT(a, 1); OBJ(o1, 2); if (!PyList_Check(op->o1)) goto bad; break;
    case C_PY:
        OBJ(o1, 1);
        if (n < 3 || slot_list(PyTuple_GET_ITEM(t, 2), nslots, &op->srcs, &op->nsrcs) < 0) goto bad;
        break;
    default:
        PyErr_Format(PyExc_ValueError, "guard plan: unknown step code %d", op->code);
        return -1;
    }
    return 0;
short_:
bad:
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "guard plan: malformed step of code %d", op->code);
    return -1;
#undef OBJ
#undef SLOT
#undef FLAG
}

static PyObject *plan_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *fallback, *names, *defaults, *kwdefaults, *ops, *handoff;
    Py_ssize_t npos, nposonly, nkwonly, nslots;
    int varargs, varkw;
    static char *kwlist[] = {"fallback", "npos", "nposonly", "nkwonly", "varargs", "varkw", "names", "defaults",
                             "kwdefaults", "nslots", "ops", "handoff", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OnnnppOOOnOO", kwlist, &fallback, &npos, &nposonly, &nkwonly,
                                     &varargs, &varkw, &names, &defaults, &kwdefaults, &nslots, &ops, &handoff))
        return NULL;
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) != npos + nkwonly || !PyList_Check(ops) ||
        (defaults != Py_None && !PyTuple_Check(defaults)) || (kwdefaults != Py_None && !PyDict_Check(kwdefaults))) {
        PyErr_SetString(PyExc_TypeError, "guard plan: bad signature description");
        return NULL;
    }
    if (nslots < npos + nkwonly + varargs + varkw) {
        PyErr_SetString(PyExc_ValueError, "guard plan: fewer slots than parameters");
        return NULL;
    }
    Plan *self = (Plan *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->vectorcall = plan_vectorcall;
    Py_INCREF(fallback); self->fallback = fallback;
    Py_INCREF(names); self->names = names;
    if (defaults != Py_None) { Py_INCREF(defaults); self->defaults = defaults; }
    if (kwdefaults != Py_None) { Py_INCREF(kwdefaults); self->kwdefaults = kwdefaults; }
    self->npos = npos; self->nposonly = nposonly; self->nkwonly = nkwonly;
    self->varargs = varargs; self->varkw = varkw; self->nslots = nslots;
    Py_ssize_t nops = PyList_GET_SIZE(ops);
    self->ops = PyMem_Calloc(nops + 1, sizeof(Op));
    if (!self->ops) { Py_DECREF(self); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < nops; i++) {
        self->nops = i + 1;
        if (build_op(&self->ops[i], PyList_GET_ITEM(ops, i), nslots) < 0) { Py_DECREF(self); return NULL; }
    }
    self->nops = nops;
    if (handoff == Py_None) {
        self->nhandoff = -1;
    } else if (slot_list(handoff, nslots, &self->handoff, &self->nhandoff) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* -- running it ---------------------------------------------------------------------- */

#include "_guard_tensors.h"

static int truth_of(PyObject *r) {   /* steals r */
    if (!r) return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

static PyObject *call_slots(PyObject *fn, PyObject **slots, const Op *op) {
    PyObject *small[8] = {NULL};
    PyObject **argv = op->nsrcs <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * op->nsrcs);
    if (!argv) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < op->nsrcs; i++) argv[i] = slots[op->srcs[i]];
    PyObject *r = PyObject_Vectorcall(fn, argv, op->nsrcs, NULL);
    if (argv != small) PyMem_Free(argv);
    return r;
}

/* one step: 1 go on, 0 the guard failed, -1 error */
static int run_op(Op *op, PyObject **slots) {
    PyObject *v = NULL, *x;
    int ok;
    switch (op->code) {
    case L_ATTR:
        x = fast_getattr(&op->ac[0], slots[op->b], op->o1);
        if (!x) return -1;
        Py_XSETREF(slots[op->a], x);
        return 1;
    case L_ITEM:
        if (PyDict_CheckExact(slots[op->b])) {
            /* ``d[k]`` of an exact dict: the lookup, or a KeyError, which means False */
            x = PyDict_GetItemWithError(slots[op->b], op->o1);
            if (!x) return PyErr_Occurred() ? -1 : 0;
            Py_INCREF(x);
            Py_XSETREF(slots[op->a], x);
            return 1;
        }
        x = PyObject_GetItem(slots[op->b], op->o1);
        if (!x) return -1;
        Py_XSETREF(slots[op->a], x);
        return 1;
    case L_CONST:
        Py_INCREF(op->o1);
        Py_XSETREF(slots[op->a], op->o1);
        return 1;
    case L_CALL:
        x = call_slots(op->o1, slots, op);
        if (!x) return -1;
        Py_XSETREF(slots[op->a], x);
        return 1;
    case C_PY:
        return truth_of(call_slots(op->o1, slots, op));
    case C_CALL_IS:
        x = PyObject_CallNoArgs(op->o1);
        if (!x) return -1;
        ok = x == op->o2;
        Py_DECREF(x);
        return ok;
    case C_CALL_EQ:
        x = PyObject_CallNoArgs(op->o1);
        if (!x) return -1;
        ok = truth_of(PyObject_RichCompare(x, op->o2, Py_EQ));
        Py_DECREF(x);
        return ok;
    default:
        break;
    }
    v = slots[op->a];
    switch (op->code) {
    case C_IS: return v == op->o1;
    case C_TYPE: return (PyObject *)Py_TYPE(v) == op->o1;
    case C_EQ: return truth_of(PyObject_RichCompare(v, op->o1, Py_EQ));
    case C_LEN: {
        Py_ssize_t n = PyObject_Length(v);
        return n < 0 ? -1 : n == op->nsizes;
    }
    case C_TENSOR: return check_tensor(op, v);
    case C_SAME: return v == slots[op->b];
    case C_ATTR_IS:
        x = fast_getattr(&op->ac[0], v, op->o1);
        if (!x) return -1;
        ok = x == op->o2;
        Py_DECREF(x);
        return ok;
    case C_METHOD_IS: {
        x = fast_call_method(&op->ac[0], v, op->o1);
        if (!x) return -1;
        ok = x == op->o2;
        Py_DECREF(x);
        return ok;
    }
    case C_FALSY_ATTRS: {
        /* ``not (v.a or v.b or ...)``: read in order, stop at the first true one */
        Py_ssize_t n = PyTuple_GET_SIZE(op->o1);
        for (Py_ssize_t i = 0; i < n; i++) {
            AttrCache *c = i < N_ATTR_CACHES ? &op->ac[i] : NULL;
            PyObject *name = PyTuple_GET_ITEM(op->o1, i);
            ok = truth_of(c ? fast_getattr(c, v, name) : PyObject_GetAttr(v, name));
            if (ok != 0) return ok < 0 ? -1 : 0;
        }
        return 1;
    }
    case C_IN_DICT:
        x = fast_getattr(&op->ac[0], v, s_dict);
        if (!x) return -1;
        ok = PySequence_Contains(x, op->o1);
        Py_DECREF(x);
        return ok < 0 ? -1 : ok == op->flag;
    case C_IN:
        ok = PySequence_Contains(v, op->o1);
        return ok < 0 ? -1 : ok == op->flag;
    case C_HASATTR:
        /* ``hasattr(v, name)``: only an AttributeError means False */
        x = PyObject_GetAttr(v, op->o1);
        if (x) { Py_DECREF(x); ok = 1; }
        else if (PyErr_ExceptionMatches(PyExc_AttributeError)) { PyErr_Clear(); ok = 0; }
        else return -1;
        return ok == op->flag;
    case C_TRUTH:
        ok = PyObject_IsTrue(v);
        return ok < 0 ? -1 : ok == op->flag;
    case C_KEYS: {
        /* ``list(v) == keys`` */
        PyObject *keys = PySequence_List(v);
        if (!keys) return -1;
        ok = truth_of(PyObject_RichCompare(keys, op->o1, Py_EQ));
        Py_DECREF(keys);
        return ok;
    }
    }
    PyErr_Format(PyExc_SystemError, "guard plan: bad step %d", op->code);
    return -1;
}

/* Bind the call's arguments into slots as the guard function's signature would; 1 done,
 * 0 not the simple way (the Python guard decides), -1 error. */
static int bind(Plan *p, PyObject **slots, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t npos = p->npos, i;
    if (nargs > npos && !p->varargs) return 0;
    Py_ssize_t take = nargs < npos ? nargs : npos;
    for (i = 0; i < take; i++) { Py_INCREF(args[i]); slots[i] = args[i]; }
    Py_ssize_t next = npos + p->nkwonly;
    if (p->varargs) {
        PyObject *rest = PyTuple_New(nargs > npos ? nargs - npos : 0);
        if (!rest) return -1;
        for (i = npos; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(rest, i - npos, args[i]); }
        slots[next++] = rest;
    }
    PyObject *varkw = NULL;
    if (p->varkw) {
        varkw = PyDict_New();
        if (!varkw) return -1;
        slots[next] = varkw;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t first = p->nposonly > 1 ? p->nposonly : 1;   /* ___fn is never given by name */
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        Py_ssize_t found = -1, total = npos + p->nkwonly;
        for (i = first; i < total; i++)
            if (PyTuple_GET_ITEM(p->names, i) == name) { found = i; break; }
        if (found < 0)
            for (i = first; i < total; i++) {
                int eq = PyUnicode_Compare(PyTuple_GET_ITEM(p->names, i), name);
                if (eq == -1 && PyErr_Occurred()) return -1;
                if (eq == 0) { found = i; break; }
            }
        if (found >= 0) {
            if (slots[found]) return 0;        /* given twice: Python's TypeError */
            Py_INCREF(value);
            slots[found] = value;
        } else if (varkw && PyUnicode_Compare(name, PyTuple_GET_ITEM(p->names, 0)) != 0) {
            if (PyDict_SetItem(varkw, name, value) < 0) return -1;
        } else {
            if (PyErr_Occurred()) return -1;
            return 0;
        }
    }
    Py_ssize_t ndef = p->defaults ? PyTuple_GET_SIZE(p->defaults) : 0;
    for (i = nargs; i < npos; i++) {
        if (slots[i]) continue;
        Py_ssize_t d = i - (npos - ndef);
        if (d < 0) return 0;                   /* missing argument: Python's TypeError */
        PyObject *dv = PyTuple_GET_ITEM(p->defaults, d);
        Py_INCREF(dv);
        slots[i] = dv;
    }
    for (i = npos; i < npos + p->nkwonly; i++) {
        if (slots[i]) continue;
        PyObject *dv = p->kwdefaults ? PyDict_GetItemWithError(p->kwdefaults, PyTuple_GET_ITEM(p->names, i)) : NULL;
        if (!dv) return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(dv);
        slots[i] = dv;
    }
    return 1;
}

static PyObject *plan_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Plan *p = (Plan *)self_;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *small[256];
    PyObject **slots = p->nslots <= 256 ? small : PyMem_Malloc(sizeof(PyObject *) * p->nslots);
    if (!slots) return PyErr_NoMemory();
    memset(slots, 0, sizeof(PyObject *) * p->nslots);
    PyObject *result = NULL;
    int ok = bind(p, slots, args, nargs, kwnames);
    if (ok == 0) {
        result = PyObject_Vectorcall(p->fallback, args, nargsf, kwnames);
        goto done;
    }
    if (ok < 0) goto error;
    for (Py_ssize_t i = 0; i < p->nops; i++) {
        ok = run_op(&p->ops[i], slots);
        if (ok < 0) goto error;
        if (ok == 0) { result = Py_NewRef(Py_False); goto done; }
    }
    if (p->nhandoff < 0) {
        result = Py_NewRef(Py_True);
    } else {
        result = PyTuple_New(p->nhandoff);
        if (!result) goto error;
        for (Py_ssize_t i = 0; i < p->nhandoff; i++)
            PyTuple_SET_ITEM(result, i, Py_NewRef(slots[p->handoff[i]]));
    }
    goto done;
error:
    /* the Python guard: ``except Exception: return False`` */
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        result = Py_NewRef(Py_False);
    }
done:
    for (Py_ssize_t i = 0; i < p->nslots; i++) Py_XDECREF(slots[i]);
    if (slots != small) PyMem_Free(slots);
    return result;
}

static PyObject *plan_get_fallback(Plan *self, void *closure) { return Py_NewRef(self->fallback); }
static PyObject *plan_get_nops(Plan *self, void *closure) { return PyLong_FromSsize_t(self->nops); }

/* for tests and tuning: per step, the modes of its attribute caches (0: not cached) */
static PyObject *plan_get_caches(Plan *self, void *closure) {
    PyObject *out = PyList_New(self->nops);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < self->nops; i++) {
        Op *op = &self->ops[i];
        PyObject *t = PyTuple_New(N_ATTR_CACHES);
        if (!t) { Py_DECREF(out); return NULL; }
        for (int k = 0; k < N_ATTR_CACHES; k++)
            PyTuple_SET_ITEM(t, k, PyLong_FromLong(op->ac[k].type ? op->ac[k].mode : 0));
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

static PyGetSetDef plan_getset[] = {
    {"attribute_caches", (getter)plan_get_caches, NULL, "per step, its attribute caches' modes (0: none)", NULL},
    {"python", (getter)plan_get_fallback, NULL, "the generated Python guard this plan was made from", NULL},
    {"steps", (getter)plan_get_nops, NULL, "the number of steps", NULL},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln._guard_plan.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_vectorcall_offset = offsetof(Plan, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A guard plan: called like the guard function it was made from, takes its decisions.",
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_getset = plan_getset,
    .tp_new = plan_new,
};

/* use_tensor_facts(capsule, torch._C.TensorBase): tensor checks read _tensor_facts.cpp's facts */
static PyObject *use_tensor_facts(PyObject *module, PyObject *args) {
    PyObject *capsule, *base;
    if (!PyArg_ParseTuple(args, "OO!", &capsule, &PyType_Type, &base)) return NULL;
    const KilnTensorFactsAPI *api = PyCapsule_GetPointer(capsule, KILN_TENSOR_FACTS_CAPSULE);
    if (!api) return NULL;
    Py_INCREF(base);
    Py_XSETREF(tensor_base, base);
    Py_INCREF(capsule);   /* kept alive for the process: the table lives in its module */
    tf_api = api;
    Py_RETURN_NONE;
}

static PyObject *tensor_facts_in_use(PyObject *module, PyObject *unused) {
    return PyBool_FromLong(tf_api != NULL);
}

static PyMethodDef module_methods[] = {
    {"use_tensor_facts", use_tensor_facts, METH_VARARGS, "read tensor checks' facts from _tensor_facts.cpp's table"},
    {"tensor_facts_in_use", tensor_facts_in_use, METH_NOARGS, "whether tensor checks read the facts table"},
    {NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_guard_plan", "Kiln's guard accelerator (see _guard_plan.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__guard_plan(void) {
#define INTERN(var, text) if (!(var = PyUnicode_InternFromString(text))) return NULL
    INTERN(s_dtype, "dtype"); INTERN(s_is_cpu, "is_cpu"); INTERN(s_device, "device");
    INTERN(s_requires_grad, "requires_grad"); INTERN(s_shape, "shape"); INTERN(s_stride, "stride");
    INTERN(s_dict, "__dict__"); INTERN(s_getattribute, "__getattribute__");
    s_facts_names[0] = s_dtype; s_facts_names[1] = s_is_cpu; s_facts_names[2] = s_device;
    s_facts_names[3] = s_requires_grad; s_facts_names[4] = s_shape; s_facts_names[5] = s_stride;
#undef INTERN
    /* a class with __getattr__, to learn the hook's tp_getattro */
    PyObject *probe = PyObject_CallFunction((PyObject *)&PyType_Type, "s(){sO}", "_KilnProbe", "__getattr__",
                                            (PyObject *)&PyBaseObject_Type);
    if (!probe) return NULL;
    hook_getattro = ((PyTypeObject *)probe)->tp_getattro;
    Py_DECREF(probe);
    object_getattribute = _PyType_Lookup(&PyBaseObject_Type, s_getattribute);
    if (!object_getattribute) return NULL;
    Py_INCREF(object_getattribute);
    if (PyType_Ready(&PlanType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&PlanType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) { Py_DECREF(&PlanType); Py_DECREF(m); return NULL; }
    return m;
}
