"""The Tensor and what makes one: the class, its PyTorch-named methods, the tape node that records
where it came from, factories, device transfer, random generation, sparse and complex layouts.

The map (each file's docstring says more)::

    tensor/
      core.py             Tensor: payload, operators, the machinery's protocol (raw_array,
                          raw_grad, creator, output_index, wrap), tensor(), as_tensor()
      methods/            the PyTorch-named methods, mixed into Tensor by job (shape, reduce,
                          math, division, rearrange, compare, index, scatter, inplace, convert,
                          cumulative, unique, layout, numpy_protocol, ported, ported_random),
                          Size, AttributeError hints and suggestions (hints, suggest)
      tape.py             the tape Node one eager op call records (a tensor's ``creator``), and
                          ``record``/``edge``, the one place nodes and edges are made
      factories.py        zeros, ones, full, empty, arange, linspace and their *_like forms
      transfer.py         to_device (differentiable) and from_dlpack
      random.py           Generator, the per-device default generators (the random ops' source),
                          seed/manual_seed and the samplers (public as ``dualflow.random``)
      sparse.py           COO tensors (public as ``dualflow.sparse``)
      complex_tensors.py  view_as_complex, view_as_real, complex, polar
      einsum.py           einsum (public as ``dualflow.einsum``), a composite of ops

Layering: this package imports ``ops`` and below, never ``autograd``: the engine builds Tensors,
so ``Tensor.backward`` reaches it through what ``dualflow/__init__`` installs
(``dualflow/_installed.py``), and the tape, the data a Tensor carries, lives here rather than in
``autograd`` (the eager interpreter and the engine, which read it). Keeping autograd a separate
folder above this one, rather than inside it, keeps the engine's code out of the Tensor's import
and the arrow one-way.

Import cycle: a Tensor's methods return Tensors. ``core`` defines ``Tensor`` as the mixins of
``methods`` (``methods.compare``, ``methods.convert``, ``methods.division``, ``methods.layout``,
``methods.ported``...)
and its ``to_device`` is ``transfer``'s; those methods build their results with ``core``,
``factories``, ``random`` (``methods.ported_random``), ``sparse`` (``to_sparse``) and ``tape``
(which wraps saved outputs as Tensors). In each loop one import runs at call time,
so the modules load in one order. Issue 37's item 5 (one class over many mixin files) is where
the methods' split is to be revisited.

Import its modules with ``from dualflow.tensor.core import Tensor`` (not ``import
dualflow.tensor.core``): the attribute ``dualflow.tensor`` is PyTorch's function ``tensor(data)``
(``dualflow/__init__`` keeps it so), and ``dualflow.random``/``dualflow.sparse`` name this
package's ``random`` and ``sparse``.
"""
