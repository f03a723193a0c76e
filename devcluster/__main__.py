import sys

from . import cluster, multikueue

argv = sys.argv[1:]
sys.exit(multikueue.main(argv[1:]) if argv[:1] == ["multikueue"] else cluster.main(argv))
