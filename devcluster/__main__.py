import sys

from .cluster import main

sys.exit(main(sys.argv[1:]))
