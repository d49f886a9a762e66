"""``python -m csem`` runs the ``csem`` command."""

from csem.cli import main

main()
