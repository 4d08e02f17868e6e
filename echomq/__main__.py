import sys

from .cli import main

# The guard keeps `import echomq.__main__` (as multiprocessing's spawn does)
# from running the CLI.
if __name__ == "__main__":
    sys.exit(main())
