# data/ holds a synthetic protocol that the plugin tests copy into pytester projects.
collect_ignore_glob = ["data/*"]
