"""``python -m rxllm``: the same as the ``rxllm`` command."""

from rxllm.cli import main

raise SystemExit(main())
