"""Backends with planted bugs, for testing the minifier and the bisector.

Each is a module-level function so that a repro script can import it by name.  Each bug
is confined to one kind of op (or to aliased inputs), so a correct minifier must end on
a graph containing that op.
"""
import torch
import torch.fx

from kiln.backends._aot import aot_compile, boxed

_GELUS = (torch._C._nn.gelu, torch.nn.functional.gelu, torch.ops.aten.gelu.default)


def _rewritten(gm: torch.fx.GraphModule, edit) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env = {}
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
        edit(env[node])
    return torch.fx.GraphModule(gm, graph)


def _tanh_gelu(node):
    if node.op == "call_function" and node.target in _GELUS:
        node.kwargs = {**node.kwargs, "approximate": "tanh"}
    if node.op == "call_method" and node.target == "gelu":
        node.kwargs = {**node.kwargs, "approximate": "tanh"}


def gelu_miscompiled(gm, example_inputs):
    """A value miscompile of one op: every exact GELU runs as the tanh approximation."""
    return _rewritten(gm, _tanh_gelu).forward


def cos_miscompiled(gm, example_inputs):
    """``cos(x)`` computed as ``cos(x * 1.001)``: wrong only in graphs that call cos."""
    def edit(node):
        if (node.op == "call_function" and node.target is torch.cos) or (node.op == "call_method"
                                                                         and node.target == "cos"):
            graph = node.graph
            with graph.inserting_before(node):
                scaled = graph.call_function(torch.mul, (node.args[0], 1.001))
            node.args = (scaled,)
    return _rewritten(gm, edit).forward


def crashes_on_sigmoid(gm, example_inputs):
    """A backend with no kernel for sigmoid: compiling any graph that uses it raises."""
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method") and "sigmoid" in str(getattr(node.target, "__name__", node.target)):
            raise NotImplementedError("planted: this backend has no sigmoid kernel")
    return gm.forward


def clones_inputs(gm, example_inputs):
    """Runs the graph on private copies of its inputs and copies them back afterwards.

    Correct for inputs that do not share memory; wrong when two inputs view one buffer
    and the graph writes through one of them: the other copy never sees the write."""
    def run(*args):
        private = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]  # autograd kept
        out = gm(*private)
        with torch.no_grad():
            for real, mine in zip(args, private):
                if isinstance(real, torch.Tensor) and not torch.equal(real, mine):
                    real.copy_(mine)
        return out
    return run


# it claims to run graphs as they are (backends/contract.py), so Kiln hands it the graphs
# that mutate aliased inputs (an undeclared backend would not get them: they run op by op)
clones_inputs.runs_graph_as_is = True


def _tanh_gelu_backward(gm, example_inputs):
    def edit(node):
        if node.op == "call_function" and node.target is torch.ops.aten.gelu_backward.default:
            node.kwargs = {**node.kwargs, "approximate": "tanh"}
    return boxed(_rewritten(gm, edit).forward)


def _as_is(gm, example_inputs):
    return boxed(gm.forward)


def gelu_backward_miscompiled(gm, example_inputs):
    """Forward exact, backward wrong: GELU's gradient uses the tanh approximation."""
    return aot_compile(gm, example_inputs, backend_name="gelu_backward_miscompiled",
                       fw_compiler=_as_is, bw_compiler=_tanh_gelu_backward,
                       keep_inference_input_mutations=True)


def wrong_after_first_call(gm, example_inputs):
    """Right on its first call, 1% off on every later one (a stateful backend): no graph
    is wrong alone on the inputs of its first call."""
    calls = [0]

    def run(*args):
        calls[0] += 1
        out = gm(*args)
        if calls[0] == 1:
            return out
        return tuple(o * 1.01 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)
    return run


def returns_copies(gm, example_inputs):
    """Values right, aliasing wrong: every output comes back as a fresh copy, so an output
    that is a view of an input in eager (``x.contiguous().view(...)``) is not one here."""
    def run(*args):
        return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in gm(*args))
    return run


# it claims to run graphs as they are (backends/contract.py), so Kiln hands it every graph,
# the one before a training step's backward too (an undeclared backend would not get it)
returns_copies.runs_graph_as_is = True


def mutates_behind_autograd(gm, example_inputs):
    """Values right, autograd misled: the graph runs on private copies of its inputs, which
    are written back through ``.data``, so an input the graph changes in place has the new
    values but an unmoved version counter (autograd cannot see the change)."""
    def run(*args):
        private = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = gm(*private)
        for real, mine in zip(args, private):
            if isinstance(real, torch.Tensor) and not torch.equal(real, mine):
                real.data.copy_(mine)
        return out
    return run


def borrows_input_buffers(gm, example_inputs):
    """Values right, a mutation added: after running the graph it uses each floating input's
    buffer as scratch space and puts the values back, so inputs eager leaves alone have
    their version counters bumped (autograd then reports a spurious in-place change)."""
    def run(*args):
        out = gm(*args)
        with torch.no_grad():
            for a in args:
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    saved = a.clone()
                    a.zero_()
                    a.copy_(saved)
        return out
    return run


borrows_input_buffers.runs_graph_as_is = True


def merges_equal_outputs(gm, example_inputs):
    """Values right, aliasing wrong: an output equal to an earlier one (same values and
    layout) is returned as that earlier tensor, so outputs eager computes separately share
    memory (writing into one changes the other)."""
    def run(*args):
        out = list(gm(*args))
        for i, o in enumerate(out):
            for earlier in out[:i]:
                if (isinstance(o, torch.Tensor) and isinstance(earlier, torch.Tensor) and o is not earlier
                        and o.shape == earlier.shape and o.dtype == earlier.dtype
                        and o.stride() == earlier.stride() and torch.equal(o, earlier)):
                    out[i] = earlier
                    break
        return tuple(out)
    return run
