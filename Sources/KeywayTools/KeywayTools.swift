// KeywayTools: what only the `keyway` command shows a person (docs/ARCHITECTURE.md §2). The PAM module never
// links it, so it may use what Embedded Swift lacks.
