"""A differential fuzzer: random training-step programs run eagerly and compiled, compared bit by
bit (O0, ``passes="exact"``) or against the documented rules' bounds (O2).

``generator`` draws a program spec, ``build`` turns a spec into a step function with fresh state,
``compare`` runs eager and compiled twins and compares outputs and every piece of state;
``fragments`` holds the extensible list of program pieces.
"""
