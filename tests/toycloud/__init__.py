"""A toy cloud, plugged into vmplane from outside its tree (issue 27 item 7): its "cloud" is one JSON file.

`tests.toycloud.plugin` is the plugin module: importing it registers the cloud's spec and descriptor, which
is all a plugin does (`VMPLANE_CLOUD_PLUGINS=tests.toycloud.plugin vmplane apply -f toy.jsonc`, or the
entry-point group `vmplane.clouds`). This package itself registers nothing, so pytest can import it.
"""
