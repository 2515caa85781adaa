"""kiln.compile on modules whose class is made at run time or overrides ``__new__``
(what FSDP2's ``fully_shard`` and ``torch.nn.utils.parametrize`` do): the compiled
module stays an instance of that class and behaves as the module did."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

import kiln


class _BuildsOriginalClass:
    """Like FSDP2's FSDPModule: building the dynamic class builds the original class,
    found by its position in the MRO."""

    def __new__(cls, *args, **kwargs):
        original = cls.__mro__[2]
        self = original.__new__(original)
        self.__init__(*args, **kwargs)
        return self


def _dynamic(module: nn.Module) -> nn.Module:
    module.__class__ = type(f"Dyn{type(module).__name__}", (_BuildsOriginalClass, type(module)), {})
    return module


def test_module_with_a_run_time_class_and_mro_based_new_compiles():
    torch.manual_seed(0)
    mod = _dynamic(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
    compiled = kiln.compile(mod, backend="aot_eager")
    assert isinstance(compiled, type(mod)) and isinstance(compiled, _BuildsOriginalClass)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), mod(x), rtol=0, atol=0)
    assert list(compiled.state_dict()) == list(mod.state_dict())
    assert [p is q for p, q in zip(compiled.parameters(), mod.parameters())] == [True] * 4
    # a container slicing itself calls type(self)(...): a plain Sequential, as eager gives
    head = compiled[:2]
    assert type(head) is nn.Sequential and head[0] is mod[0]


def test_module_whose_class_overrides_new_compiles():
    made = []

    class Counted(nn.Linear):
        def __new__(cls, *args, **kwargs):
            made.append(cls)
            return super().__new__(cls)

    mod = Counted(3, 3)
    compiled = kiln.compile(mod)
    assert made == [Counted], "compiling must not build another module"
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), mod(x), rtol=0, atol=0)
    assert isinstance(compiled, Counted)


class _Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(0, 1)


def test_parametrized_module_before_and_after_compiling():
    torch.manual_seed(0)
    mod = nn.Linear(4, 4)
    parametrize.register_parametrization(mod, "weight", _Symmetric())
    compiled = kiln.compile(mod, backend="aot_eager")
    x = torch.randn(2, 4, requires_grad=True)
    out = compiled(x)
    torch.testing.assert_close(out, mod(x), rtol=0, atol=0)
    out.sum().backward()
    assert mod.parametrizations.weight.original.grad is not None
    # a parametrization registered on the compiled module changes the class of the wrapper
    other = kiln.compile(nn.Linear(4, 4))
    parametrize.register_parametrization(other, "weight", _Symmetric())
    assert parametrize.is_parametrized(other, "weight")
    torch.testing.assert_close(other(x), torch.nn.functional.linear(x, other.weight, other.bias))


def test_hooks_registered_on_the_original_run_through_the_compiled_module():
    mod = nn.Linear(3, 3)
    seen = []
    mod.register_forward_hook(lambda m, args, out: seen.append(m))
    compiled = kiln.compile(mod)
    compiled(torch.randn(1, 3))
    assert len(seen) == 1
