"""The model of docs/debugging.md: a small network whose second block hands a graph two
views of one buffer, and the graph writes through one of them (the shape of the historical second seed).

    kiln bisect docs/examples/debugging_demo.py:Net --backend tests.debug.planted_backends:clones_inputs
    kiln minify docs/examples/debugging_demo.py:Net --backend tests.debug.planted_backends:clones_inputs

``clones_inputs`` is a backend with a planted bug: it runs each graph on private copies
of its inputs, which is right unless two inputs share memory.
"""
import torch

import kiln


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Linear(16, 64)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(3))
        self.out = torch.nn.Linear(64, 4)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for i, block in enumerate(self.blocks):
            h = torch.nn.functional.gelu(block(h))
            flat = h.view(-1)
            kiln.graph_break()            # stands for anything Kiln runs as Python
            if i == 1:
                flat.mul_(0.5)            # through `flat`, `h` changes too
            h = torch.tanh(h) + h.mean(-1, keepdim=True)
        return self.out(h).softmax(-1)


def example_inputs():
    torch.manual_seed(1)
    return (torch.randn(32, 16),)


if __name__ == "__main__":
    # python docs/examples/debugging_demo.py: run it compiled with the buggy backend and
    # compare with eager against a float64 reference
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))   # the repository root
    from kiln.debug import compare, fp64_copy
    from tests.debug.planted_backends import clones_inputs

    (x,) = example_inputs()
    model = Net()
    expected = model(x)
    reference = fp64_copy(model)(fp64_copy(x))
    actual = kiln.compile(Net(), backend=clones_inputs)(x)
    print(compare(expected, actual, reference))
