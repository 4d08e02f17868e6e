import sys

from echomq_bench.cli import main

# The guard keeps `import echomq_bench.__main__` (as multiprocessing's spawn does)
# from running the CLI.
if __name__ == "__main__":
    sys.exit(main())
