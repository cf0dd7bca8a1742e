"""``python -m sessions_core``: the ``sessions`` command line."""

from .cli import main

if __name__ == "__main__":
    main()
