"""Ops that draw random numbers inside them draw eager's numbers under every backend.

The case that found it: a word-level language model (embedding -> dropout -> two-layer
``nn.LSTM`` with dropout 0.2 -> dropout -> linear decoder, as in PyTorch's examples)
trained under ``aot_eager`` differed from eager by 0.05 from the first call, and the
generator ended elsewhere: AOTAutograd traces ``torch.lstm`` through PyTorch's Python
decomposition, which never applies the dropout between layers.  Kiln notes the draws of
every recorded call on its fake run (eager's kernels) and runs a graph op by op when
AOTAutograd's trace of one of its calls would draw differently
(``backends/random_draws.py``).  Every other random op keeps its graph compiled.

Each case compares compiled with eager on two calls: outputs, gradients, parameters
after an SGD step and ``torch.get_rng_state()`` after every call.
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln.backends import BackendFallbackWarning, lookup
from kiln.backends.random_draws import redrawn_by_trace
from kiln.testing import CompileCounter


def counted(name: str):
    """Backend ``name`` behind a CompileCounter; it declares what ``name`` declares, so
    Kiln treats it as that backend."""
    counter, real = CompileCounter(), lookup(name)

    def backend(gm, example_inputs):
        counter(gm, example_inputs)
        return real(gm, example_inputs)

    backend.applies_input_mutations_last = getattr(real, "applies_input_mutations_last", False)
    return backend, counter


class WordLanguageModel(nn.Module):
    """The RNN model of PyTorch's word_language_model example, small."""

    def __init__(self, ntoken=50, ninp=16, nhid=16, nlayers=2, dropout=0.2, tie_weights=True):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight

    def forward(self, tokens, hidden):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output).view(-1, self.ntoken), hidden


def lm_loss(model, tokens, targets, hidden):
    logits, hidden = model(tokens, hidden)
    return F.cross_entropy(logits, targets.view(-1)), logits, hidden


def _batches(steps=2, seq=7, batch=3, ntoken=50):
    g = torch.Generator().manual_seed(11)
    return [(torch.randint(0, ntoken, (seq, batch), generator=g), torch.randint(0, ntoken, (seq, batch), generator=g))
            for _ in range(steps)]


def _train(step_fn, model, batches, seed):
    """SGD steps with ``step_fn``; what each step gave and the generator after each call."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hidden = (torch.zeros(2, 3, 16), torch.zeros(2, 3, 16))
    torch.manual_seed(seed)
    record = []
    for tokens, targets in batches:
        opt.zero_grad()
        loss, logits, hidden = step_fn(model, tokens, targets, hidden)
        rng = torch.get_rng_state()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        opt.step()
        hidden = tuple(h.detach() for h in hidden)
        record.append((loss.detach(), logits.detach(), rng, grads,
                       {n: p.detach().clone() for n, p in model.named_parameters()}))
    return record


def _assert_same(got, want):
    for (loss, logits, rng, grads, params), (wloss, wlogits, wrng, wgrads, wparams) in zip(got, want):
        assert torch.equal(rng, wrng), "the generator is not where eager leaves it"
        torch.testing.assert_close(loss, wloss, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(logits, wlogits, rtol=1e-6, atol=1e-6)
        assert grads.keys() == wgrads.keys()
        for name in grads:
            torch.testing.assert_close(grads[name], wgrads[name], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(params[name], wparams[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend_name", ["aot_eager", "aten"])
@pytest.mark.parametrize("tie_weights", [True, False])
def test_word_language_model_trains_as_in_eager(backend_name, tie_weights):
    torch.manual_seed(0)
    model = WordLanguageModel(tie_weights=tie_weights).train()
    twin = copy.deepcopy(model)
    batches = _batches()
    want = _train(lm_loss, model, batches, seed=5)
    backend, counter = counted(backend_name)
    step = kiln.compile(lm_loss, backend=backend, fullgraph=True)
    got = _train(step, twin, batches, seed=5)
    _assert_same(got, want)
    # one graph for both steps; AOTAutograd's trace of torch.lstm would drop the dropout
    # between the layers, so it runs op by op and the backend is never asked
    assert kiln.metrics.graphs == 1 and kiln.metrics.recompiles == 0
    assert counter.frame_count == 0


@pytest.mark.parametrize("backend_name", ["aot_eager", "aten"])
def test_word_language_model_without_rnn_dropout_is_compiled(backend_name):
    """Without dropout between the layers (or in eval mode) the LSTM draws nothing, and
    the graph goes to the backend."""
    torch.manual_seed(0)
    model = WordLanguageModel(nlayers=2, dropout=0.0).train()
    twin = copy.deepcopy(model)
    batches = _batches()
    want = _train(lm_loss, model, batches, seed=5)
    backend, counter = counted(backend_name)
    got = _train(kiln.compile(lm_loss, backend=backend, fullgraph=True), twin, batches, seed=5)
    _assert_same(got, want)
    assert kiln.metrics.graphs == 1 and counter.frame_count == 1

    model.eval()
    compiled = kiln.compile(lambda tokens, hidden: model(tokens, hidden)[0], backend=counted(backend_name)[0])
    hidden = (torch.zeros(2, 3, 16), torch.zeros(2, 3, 16))
    with torch.no_grad():
        for tokens, _ in batches:
            torch.testing.assert_close(compiled(tokens, hidden), model(tokens, hidden)[0], rtol=1e-6, atol=1e-6)


def _lstm_with_backend(backend, want_calls, want_warning):
    kiln.config.raise_on_backend_error = False
    lstm = nn.LSTM(8, 8, 2, dropout=0.5)
    compiled = kiln.compile(lambda x: lstm(x)[0] * 2, backend=backend)
    for seed in (0, 1):
        x = torch.randn(5, 2, 8, generator=torch.Generator().manual_seed(seed))
        torch.manual_seed(seed)
        want, want_rng = lstm(x)[0] * 2, torch.get_rng_state()
        torch.manual_seed(seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(x)
        assert torch.equal(torch.get_rng_state(), want_rng)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        if seed == 0:
            assert want_warning == any(issubclass(w.category, BackendFallbackWarning)
                                       and "random numbers" in str(w.message) for w in caught)
    assert len(backend.calls) == want_calls and kiln.metrics.graphs == 1


def _wrapper_around_aot_eager(**declared):
    def wrapper(gm, example_inputs):
        wrapper.calls.append(gm)
        return lookup("aot_eager")(gm, example_inputs)
    wrapper.calls = []
    for name, value in declared.items():
        setattr(wrapper, name, value)
    return wrapper


def test_a_wrapped_aot_backend_gets_the_graph_op_by_op():
    """A user's wrapper that declares nothing may functionalize (backends/contract.py), so a
    graph whose AOT trace would draw other numbers runs op by op: the wrapper is not asked."""
    _lstm_with_backend(_wrapper_around_aot_eager(), want_calls=0, want_warning=False)


def test_a_wrapper_that_claims_to_run_graphs_as_they_are_still_draws_eagers_numbers():
    """A wrapper declaring ``runs_graph_as_is`` while it hands the graph to aot_eager still
    reaches aot_eager's own check, which refuses the graph: the failure policy runs it eagerly."""
    _lstm_with_backend(_wrapper_around_aot_eager(runs_graph_as_is=True), want_calls=1, want_warning=True)


def test_draws_are_observed_not_listed():
    """What the fake run saw: switched-off randomness draws nothing; a composite's draws
    are its ATen ops' (the LSTM's dropout between layers; dropout2d's one mask per channel);
    only the LSTM is drawn differently by AOTAutograd's trace."""
    counter = CompileCounter()
    lstm = nn.LSTM(4, 4, 3, dropout=0.5)

    def fn(x):
        a = F.dropout(x, 0.5, training=False) + F.dropout(x, 0.0) + F.scaled_dot_product_attention(x, x, x)
        b = F.dropout2d(x, 0.5)
        c = lstm(x[0])[0]
        return a, b, c

    kiln.compile(fn, backend=counter)(torch.randn(2, 3, 5, 4))
    (gm,) = counter.graphs
    draws = {n.name: n.meta["kiln_draws"] for n in gm.graph.nodes if n.meta.get("kiln_draws")}
    assert set(draws) == {"dropout2d", "lstm"}
    assert draws["dropout2d"] == (2 * 3,)          # one draw per (batch, channel)
    assert draws["lstm"] == (3 * 5 * 4, 3 * 5 * 4)  # (seq, batch, hidden) before layers 2 and 3
    assert redrawn_by_trace(gm).name == "lstm"


def _sdpa(x):
    q = x.reshape(4, 6, 25)[:, :, :8]
    return F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)


RANDOM_OPS = {
    "dropout": lambda x: F.dropout(x, 0.3),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, training=True),
    "feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x, 0.3, training=True),
    "dropout1d": lambda x: F.dropout1d(x[:, :, 0], 0.3),
    "dropout2d": lambda x: F.dropout2d(x, 0.3),
    "dropout3d": lambda x: F.dropout3d(x, 0.3),
    "rrelu": lambda x: F.rrelu(x, training=True),
    "rrelu_inplace": lambda x: F.rrelu(x * 1, training=True, inplace=True),
    "sdpa_dropout": _sdpa,
    "native_dropout": lambda x: torch.native_dropout(x, 0.3, True)[0],
    "bernoulli": lambda x: torch.bernoulli(torch.sigmoid(x.detach())) * x,
    "bernoulli_p": lambda x: x.detach().bernoulli(0.3) * x,
    "multinomial": lambda x: torch.multinomial(x.detach().reshape(-1, 5).softmax(-1), 3).float(),
    "normal": lambda x: torch.normal(x, 1.0),
    "randperm": lambda x: x.flatten()[torch.randperm(x.numel())],
    "rand_like": lambda x: x + torch.rand_like(x),
    "uniform_": lambda x: (x * 1).uniform_() * x,
    "exponential_": lambda x: (x * 1).exponential_() * x,
}
RNNS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


def _case(name):
    if name in RNNS:
        torch.manual_seed(0)
        rnn = RNNS[name](25, 8, 2, dropout=0.3)
        return lambda x: rnn(x.reshape(4, 6, 25))[0]
    return RANDOM_OPS[name]


def _compare_with_eager(name, backend_name):
    op = _case(name)

    def fn(x):
        return op(x) * 2

    backend, counter = counted(backend_name)
    compiled = kiln.compile(fn, backend=backend, fullgraph=True)
    for seed in (0, 1):
        base = torch.randn(4, 6, 5, 5, generator=torch.Generator().manual_seed(seed))
        results = []
        for f in (fn, compiled):
            x = base.clone().requires_grad_(True)
            torch.manual_seed(seed)
            out = f(x)
            rng = torch.get_rng_state()
            if out.requires_grad:
                out.sum().backward()
            results.append((out.detach(), rng, x.grad))
        (want, want_rng, want_grad), (got, got_rng, got_grad) = results
        assert torch.equal(got_rng, want_rng), f"{name}: the generator is not where eager leaves it"
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        if want_grad is not None:
            torch.testing.assert_close(got_grad, want_grad, rtol=1e-6, atol=1e-6)
    assert kiln.metrics.graphs == 1 and kiln.metrics.recompiles == 0
    # RNNs with dropout between layers run op by op; everything else is compiled
    assert counter.frame_count == (0 if name in RNNS else 1)


@pytest.mark.parametrize("name", [*RANDOM_OPS, *RNNS])
def test_random_op_draws_eagers_numbers_under_aot_eager(name):
    _compare_with_eager(name, "aot_eager")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dropout2d", "rrelu", "sdpa_dropout", "bernoulli", "lstm"])
def test_random_op_draws_eagers_numbers_under_inductor(name):
    _compare_with_eager(name, "inductor")


def test_checkpointed_dropout_stays_compiled_and_exact():
    """A random call inside a higher-order operator's body (activation checkpointing,
    whose backward recomputes the body) is watched there too; its draws are eager's, so
    the graph is compiled."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    lin = nn.Linear(8, 8)

    def body(x):
        return F.dropout(lin(x), 0.5).relu()

    def fn(x):
        return checkpoint(body, x, use_reentrant=False).sum()

    backend, counter = counted("aot_eager")
    compiled = kiln.compile(fn, backend=backend, fullgraph=True)
    for seed in (0, 1):
        base = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
        results = []
        for f in (fn, compiled):
            x = base.clone().requires_grad_(True)
            torch.manual_seed(seed)
            out = f(x)
            out.backward()
            results.append((out.detach(), x.grad, torch.get_rng_state()))
        (want, want_grad, want_rng), (got, got_grad, got_rng) = results
        assert torch.equal(got_rng, want_rng)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-6, atol=1e-6)
    assert kiln.metrics.graphs == 1 and counter.frame_count == 1
