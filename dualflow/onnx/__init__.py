"""``dualflow.onnx.export``: a model's or function's forward as an ONNX model (opset 17).

The forward is traced as ``@dualflow.compile`` traces it (``capture``), its graph walked op by
op into ONNX nodes (``builder``, ``converters``, ``elementwise``) and the result checked with
``onnx.checker``. Needs the optional ``onnx`` package (``pip install dualflow[onnx]``).
"""

from dualflow.errors import ExportError
from dualflow.onnx.export import export, export_graph

__all__ = ["ExportError", "export", "export_graph"]
