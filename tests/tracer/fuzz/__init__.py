"""A differential fuzzer: random training-step programs run eagerly and compiled, compared bit by
bit (O0, ``passes="exact"``) or against the documented rules' bounds (O2).

``generator`` draws a program spec, ``build`` turns a spec into a step function with fresh state,
``compare`` runs eager and compiled twins and compares outputs and every piece of state;
``fragments`` holds the extensible list of program pieces.

The ``env_*`` modules are a second fuzzer (issue 35): a grammar of the ways a step reads a Python
number from its environment (``env_roots``, ``env_steps``), programs that change it between calls
(``env_program``, ``env_draw``), compared with eager (``env_compare``); ``test_env_paths`` runs
it, ``env_known.KNOWN_SILENT`` lists today's silent mismatches, ``env_report`` prints a table.
"""
