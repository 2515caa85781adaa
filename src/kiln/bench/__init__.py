"""``kiln bench``: the model benchmark harness, side by side with torch.compile.

Layout, one job per module:

* ``registry`` / ``models_hf`` / ``models_hf_more`` / ``models_local`` / ``models_hops``:
  what a model name means;
* ``skips``: the known-failure list, with a reason per entry;
* ``driver`` (parent) and ``worker`` (subprocess): one isolated process per model;
* ``runner``: what a worker does: eager, fp64 reference, compile, time, compare;
* ``frontends``: Kiln and torch.compile behind one interface; ``checks``: accuracy glue;
* ``results``: the records that cross the process boundary; ``report`` / ``plot``:
  table, summary, CSV and chart; ``command``: the ``kiln bench`` CLI.

See docs/bench.md for how to read the output.
"""
