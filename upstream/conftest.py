# The templates are PyG's test files: they run in a PyG checkout (see
# test/upstream/test_make_pr.py), not against the installed PyG.
collect_ignore_glob = ['templates/*']
