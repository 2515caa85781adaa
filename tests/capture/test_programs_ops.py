"""Operators, tensor methods and attributes, torch.* and torch.nn.functional."""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F

from .capture_harness import Case, I, parametrize, run_case


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


def x1(r):
    return (r.randn(3, 4),)


def ij(r):
    return r.randint(1, 50, 3, 4), r.randint(1, 6, 3, 4)


def pos2(r):
    return r.positive(3, 4), r.positive(3, 4)


# -- binary operators on two tensors: one op each ------------------------------------------
BINARY = [
    Case("add_tt", lambda a, b: a + b, xy, 1, 1),
    Case("sub_tt", lambda a, b: a - b, xy, 1, 1),
    Case("mul_tt", lambda a, b: a * b, xy, 1, 1),
    Case("truediv_tt", lambda a, b: a / b, pos2, 1, 1),
    Case("floordiv_tt", lambda a, b: a // b, ij, 1, 1),
    Case("mod_tt", lambda a, b: a % b, ij, 1, 1),
    Case("pow_tt", lambda a, b: a ** b, pos2, 1, 1),
    Case("matmul_tt", lambda a, b: a @ b.T, xy, 1, 2),             # T is a permute
    Case("and_tt", lambda a, b: a & b, ij, 1, 1),
    Case("or_tt", lambda a, b: a | b, ij, 1, 1),
    Case("xor_tt", lambda a, b: a ^ b, ij, 1, 1),
    Case("lshift_tt", lambda a, b: a << b, ij, 1, 1),
    Case("rshift_tt", lambda a, b: a >> b, ij, 1, 1),
    Case("int_truediv_gives_float", lambda a, b: a / b, ij, 1, 1),
]

# -- tensor with Python numbers, both orders ----------------------------------------------
SCALAR = [
    Case("add_ts", lambda a: a + 2, x1, 1, 1),
    Case("radd_st", lambda a: 2 + a, x1, 1, 1),
    Case("rsub_st", lambda a: 1.5 - a, x1, 1, 1),
    Case("rmul_st", lambda a: 3 * a, x1, 1, 1),
    Case("rtruediv_st", lambda a, b: 1.0 / a, pos2, 1, 1),
    Case("rpow_st", lambda a: 2 ** a, x1, 1, 1),
    Case("pow_ts", lambda a: a ** 2, x1, 1, 1),
    Case("mod_ts", lambda a, b: a % 7, ij, 1, 1),
    Case("scalar_chain", lambda a: (a * 2.5 - 1) / 4, x1, 1, 3),
    Case("bool_scalar_and", lambda a: (a > 0) & True, x1, 1, 2),
]


def py_arith(x, n: int, f: float):
    k = n * 2 + 1                  # all folded at trace time
    k = k ** 2 // 3 % 50
    g = f / 2 - n + abs(-f) * 1.5
    return x * k + g, k, g


def py_bitwise(x, n):
    m = (n << 3) | (n >> 1) ^ 0b1010 & ~n
    return x + m, m


def py_divmod_int_float(x, n):
    q, r = divmod(n, 3)
    return x * q - r, n / 4, n // 4, -n % 3, 7.5 // 2


def py_compare_chain(x, n):
    if 0 < n <= 10 != n:
        return x + 1
    return x - 1


PYNUM = [
    Case("py_arith_folded", py_arith, lambda r: I(r.randn(3), 5, 2.5), 1, 2),
    Case("py_bitwise_folded", py_bitwise, lambda r: I(r.randint(0, 9, 4), 6), 1, 1),
    Case("py_divmod_int_float", py_divmod_int_float, lambda r: I(r.randn(3), 11), 1, 2),
    Case("py_compare_chain", py_compare_chain, lambda r: I(r.randn(3), 4), 1, 1),
    Case("py_unary_ops", lambda x, n: (x * -n, +n, ~n, not n), lambda r: I(r.randn(2), 3), 1, 1),
    Case("py_float_ops", lambda x, f: x * (f ** 0.5) + f % 1.0, lambda r: I(r.randn(2), 6.25), 1, 2),
]

# -- unary operators on tensors -----------------------------------------------------------
UNARY = [
    Case("neg_t", lambda a: -a, x1, 1, 1),
    Case("pos_t", lambda a: +a, x1, 1, 1),
    Case("invert_bool_t", lambda a: ~(a > 0), x1, 1, 2),
    Case("invert_int_t", lambda a, b: ~a, ij, 1, 1),
    Case("abs_builtin_t", lambda a: abs(a), x1, 1, 1),
]


# -- in-place operators ---------------------------------------------------------------------
def iadd_local(x):
    y = x * 1
    y += 2
    y -= x
    y *= 3
    y /= 2
    y **= 2
    return y


def ibit_local(a, b):
    c = a.clone()
    c &= b
    c |= 1
    c ^= b
    c <<= 1
    c >>= 2
    c //= 2
    c %= 5
    return c


def iadd_input(x, y):
    x += y        # mutates the caller's tensor
    return x


def imatmul(a, b):
    c = a
    c @= b.t()
    return c


def iadd_scalar_python(x, n):
    n += 3
    n *= 2
    return x + n


INPLACE = [
    Case("inplace_float_chain", iadd_local, x1, 1, 6),
    Case("inplace_int_chain", ibit_local, ij, 1, 8),
    Case("inplace_on_input", iadd_input, xy, 1, 1),
    Case("inplace_matmul", imatmul, xy, 1, 2),
    Case("inplace_python_int", iadd_scalar_python, lambda r: I(r.randn(2), 1), 1, 1),
    Case("method_inplace_on_clone", lambda x: x.clone().mul_(2).add_(1), x1, 1, 3),
    Case("method_inplace_on_input", lambda x: x.relu_(), x1, 1, 1),
]

# -- comparisons --------------------------------------------------------------------------
COMPARE = [
    Case("lt_tt", lambda a, b: a < b, xy, 1, 1),
    Case("le_tt", lambda a, b: a <= b, xy, 1, 1),
    Case("eq_tt", lambda a, b: a == b, ij, 1, 1),
    Case("ne_tt", lambda a, b: a != b, ij, 1, 1),
    Case("gt_ts", lambda a: a > 0.5, x1, 1, 1),
    Case("ge_st", lambda a: 0 >= a, x1, 1, 1),
    Case("compare_to_none", lambda a: (a is None, a is not None, a == None, a != None), x1, 0, 0),  # noqa: E711
    Case("compare_combined", lambda a, b: ((a > 0) & (b < 0)) | (a == b), xy, 1, 5),
]


# -- tensor attributes and metadata (free), methods (one op each) ------------------------------
def metadata(x):
    n, m = x.shape
    return x.new_zeros(n * m), x.size(), x.size(1), x.dim(), x.ndim, x.dtype, x.device, x.numel(), \
        x.is_floating_point(), x.stride(), x.is_contiguous()


def shape_driven_view(x):
    return x.view(x.shape[0], -1).sum(-1) * x.size(-1) / x.ndim


def dtype_driven(x, y):
    out = x.to(y.dtype)
    if out.dtype is torch.float64:
        out = out * 2
    return out, out.dtype.is_floating_point, torch.finfo(out.dtype).eps


def device_driven(x):
    return torch.ones(x.shape, device=x.device, dtype=x.dtype) + x


def transpose_attrs(x):
    return x.T, x.mT, x.t(), x.transpose(0, 1)


def requires_grad_branch(x):
    if x.requires_grad:
        return x * 2
    return x * 3


METADATA = [
    Case("metadata_constants", metadata, x1, 1, 1),
    Case("shape_driven_view", shape_driven_view, lambda r: r.randn(2, 3, 4), 1, 4),
    Case("dtype_driven", dtype_driven, lambda r: (r.randn(3), r.randn(3, dtype=torch.float64)), 1, 2),
    Case("device_driven", device_driven, x1, 1, 2),
    Case("transpose_attrs", transpose_attrs, lambda r: r.randn(3, 4), 1, 4),
    Case("requires_grad_branch", requires_grad_branch, lambda r: r.randn(3, requires_grad=True), 1, 1),
    Case("return_only_metadata", lambda x: (x.shape, x.dtype, len(x)), x1, 0, 0),
    Case("return_input_unchanged", lambda x, y: (y, x), xy, 0, 0),
]


def chunked(x):
    a, b, c = x.chunk(3, dim=1)
    return a + c, b


def splits(x):
    parts = x.split([1, 3], dim=1)
    return parts[1].sum(1, keepdim=True) - parts[0]


def max_dim(x):
    values, indices = x.max(dim=1)
    return values * 2, indices


def named_result(x):
    r = torch.sort(x, dim=-1, descending=True)
    return r.values[:, 0], r.indices


METHODS = [
    Case("sin_cos_exp", lambda x: x.sin() + x.cos().exp(), x1, 1, 4),
    Case("reductions", lambda x: (x.sum(), x.mean(0), x.amax(1, keepdim=True), x.std()), x1, 1, 4),
    Case("view_reshape_flatten", lambda x: (x.view(4, 3), x.reshape(-1), x.flatten(), x.unsqueeze(0).squeeze(0)),
         x1, 1, 5),
    Case("permute_contiguous", lambda x: x.permute(2, 0, 1).contiguous(), lambda r: r.randn(2, 3, 4), 1, 2),
    Case("expand_repeat", lambda x: (x[:, :1].expand(3, 4), x.repeat(2, 1)), x1, 1, 3),
    Case("dtype_conversions", lambda x: (x.float(), x.double(), x.to(torch.int32), x.long().type_as(x)),
         lambda r: r.randn(3), 1, 5),
    Case("masked_fill_where", lambda x: x.masked_fill(x < 0, 0.0).clamp(max=1.0), x1, 1, 3),
    Case("chunk_unpack", chunked, lambda r: r.randn(2, 6), 1, 5),
    Case("split_sizes", splits, x1, 1, 5),
    Case("max_with_dim", max_dim, x1, 1, 4),
    Case("sort_named_result", named_result, x1, 1, 4),
    Case("new_tensor_factories", lambda x: (x.new_zeros(2), x.new_ones(3, 1), x.new_full((2,), 7.0)), x1, 1, 3),
    Case("softmax_method", lambda x: x.softmax(-1).log(), x1, 1, 2),
    Case("topk_values", lambda x: x.topk(2, dim=1).values, x1, 1, 3),
    Case("argmax_gather", lambda x: x.gather(1, x.argmax(1, keepdim=True)), x1, 1, 2),
    Case("clone_detach", lambda x: x.clone().detach(), lambda r: r.randn(3, requires_grad=True), 1, 2),
    Case("data_attr", lambda x: x.data * 2, lambda r: r.randn(3, requires_grad=True), 1, 2),
    Case("tensor_len_and_numel", lambda x: x * len(x) + x.numel(), x1, 1, 2),
]


# -- indexing, slicing and item assignment --------------------------------------------------
def index_forms(x):
    return x[0], x[:, 1], x[1:3], x[::2], x[..., None], x[-1, -2:], x[None, 1]


def index_with_tensor(x, idx):
    return x[idx], x[:, idx]


def setitem_on_copy(x):
    y = x.clone()
    y[0] = 5.0
    y[:, 1:3] = y[:, 1:3] * 2
    return y


def setitem_on_input(x, v):
    x[1] = v
    return x.sum()


def slice_objects(x):
    s = slice(1, None)
    return x[s], x[s, :2]


def slice_inplace(x):
    y = x.clone()
    y[:, :2] += 1
    y[0] *= 2
    return y


def reversed_tensor(x):
    rows = [r * 1 for r in reversed(x)]
    return reversed(x), rows


def walrus_and_chained(x, n):
    if (m := n * 2) > 3 and 0 <= m < 100:
        x = x * m
    return x, m


INDEXING = [
    Case("index_forms", index_forms, x1, 1, 7),
    Case("index_with_tensor", index_with_tensor, lambda r: (r.randn(4, 4), r.randint(0, 4, 3)), 1, 2),
    Case("setitem_on_copy", setitem_on_copy, x1, 1, 5),
    Case("setitem_on_input", setitem_on_input, lambda r: (r.randn(3, 4), r.randn(4)), 1, 2),
    Case("slice_objects", slice_objects, x1, 1, 2),
    Case("slice_inplace", slice_inplace, x1, 1, 7),
    Case("reversed_tensor", reversed_tensor, x1, 1, 9),
    Case("walrus_and_chained", walrus_and_chained, lambda r: I(r.randn(2), 4), 1, 1),
]


# -- torch.* functions ----------------------------------------------------------------------
def factories(x):
    z = torch.zeros(3, 4)
    o = torch.ones_like(x)
    a = torch.arange(4, dtype=x.dtype)
    f = torch.full((3, 1), 2.0)
    e = torch.eye(4)[:3]
    return x + z + o * a + f @ torch.ones(1, 4) + e


def torch_combine(a, b):
    return torch.cat([a, b], dim=0), torch.stack((a, b)), torch.where(a > b, a, b)


def torch_math(a, b):
    return torch.maximum(a, b), torch.clamp(a, min=-0.5, max=0.5), torch.sqrt(torch.abs(a)), \
        torch.lerp(a, b, 0.25)


def torch_linalg(a, b):
    return torch.matmul(a, b.transpose(0, 1)), torch.einsum("ij,kj->ik", a, b), torch.mm(a, b.t()), \
        torch.bmm(a[None], b.t()[None])


def torch_reductions(x):
    return torch.sum(x, dim=1), torch.mean(x), torch.logsumexp(x, dim=0), torch.cumsum(x, dim=1), \
        torch.norm(x)


def torch_metadata_fns(x):
    if torch.is_floating_point(x) and torch.is_tensor(x) and torch.numel(x) == 12:
        return x * 2
    return x


def torch_dtypes(x):
    y = x.to(torch.float16).to(torch.float32)
    return y, torch.tensor([1.0, 2.0], dtype=torch.float64), torch.empty(2).fill_(3.0)


TORCH = [
    Case("factories", factories, x1, 1, 13),
    Case("torch_combine", torch_combine, xy, 1, 4),
    Case("torch_math", torch_math, xy, 1, 5),
    Case("torch_linalg", torch_linalg, xy, 1, 9),
    Case("torch_reductions", torch_reductions, x1, 1, 5),
    Case("torch_metadata_fns", torch_metadata_fns, x1, 1, 1),
    Case("torch_dtypes", torch_dtypes, lambda r: r.randn(4), 1, 5),
    Case("torch_tril_triu", lambda x: torch.tril(x) - torch.triu(x, diagonal=1), lambda r: r.randn(4, 4), 1, 3),
    Case("torch_flip_roll", lambda x: torch.flip(torch.roll(x, 1, 0), [1]), x1, 1, 2),
    Case("torch_unbind_stack", lambda x: torch.stack(torch.unbind(x, 1)[::-1], 1), x1, 1, 6),
]


# -- torch.nn.functional ----------------------------------------------------------------------
def f_activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.softmax(x, dim=-1), F.log_softmax(x, -1), F.leaky_relu(x, 0.1)


def f_linear(x, w, b):
    return F.linear(x, w, b).tanh()


def f_conv_pool(x, w):
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(F.relu(y), 2), F.avg_pool2d(y, 2)


def f_norms(x, w, b):
    return F.layer_norm(x, (4,), w, b), F.normalize(x, dim=-1), F.dropout(x, p=0.5, training=False)


def f_losses(x, y, target):
    return F.mse_loss(x, y), F.cross_entropy(x, target), F.l1_loss(x, y, reduction="sum")


def f_embedding_pad(idx, table):
    e = F.embedding(idx, table)
    return F.pad(e, (1, 1)), F.one_hot(idx, num_classes=10)


FUNCTIONAL = [
    Case("f_activations", f_activations, x1, 1, 6),
    Case("f_linear", f_linear, lambda r: (r.randn(2, 4), r.randn(3, 4), r.randn(3)), 1, 2),
    Case("f_conv_pool", f_conv_pool, lambda r: (r.randn(1, 2, 6, 6), r.randn(3, 2, 3, 3)), 1, 4,
         atol=1e-5, rtol=1e-5),
    Case("f_norms", f_norms, lambda r: (r.randn(3, 4), r.randn(4), r.randn(4)), 1, 3),
    Case("f_losses", f_losses, lambda r: (r.randn(3, 5), r.randn(3, 5), r.randint(0, 5, 3)), 1, 3),
    Case("f_embedding_pad", f_embedding_pad, lambda r: (r.randint(0, 10, 2, 3), r.randn(10, 4)), 1, 3),
    Case("f_interpolate", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
         lambda r: r.randn(1, 2, 3, 3), 1, 1),
]

CASES = BINARY + SCALAR + PYNUM + UNARY + INPLACE + COMPARE + METADATA + METHODS + INDEXING + TORCH + FUNCTIONAL


@parametrize(CASES)
def test_program(case):
    run_case(case)
