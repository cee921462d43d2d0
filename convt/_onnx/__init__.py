"""ONNX runtime integration: the ReferenceEvaluator op (``ops``) and the ONNX backend
(``backend``), both on convt.onnx's front end. Needs the optional ``onnx`` package."""
