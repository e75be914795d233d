"""``dualflow.func``: torch.func's functional transforms over dualflow's engine.

``functional_call`` runs a Module on parameters given as a dict; ``grad``, ``grad_and_value``,
``vjp``, ``jacrev`` are reverse mode; ``jvp``, ``jacfwd``, ``hessian`` forward mode (each op's
``jvp`` rule), ``hvp`` a Hessian-vector product; ``vmap`` maps a function over a batch
dimension (each op's ``batch`` rule). All compose and trace under ``@dualflow.compile``.
"""

from dualflow.func.forward import hessian, hvp, jacfwd, jvp
from dualflow.func.functional_call import functional_call
from dualflow.func.reverse import grad, grad_and_value, jacrev, vjp
from dualflow.func.vmap import vmap

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "hvp",
    "jacfwd",
    "jacrev",
    "jvp",
    "vjp",
    "vmap",
]
