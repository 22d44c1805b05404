# Keyway — build, test and install. `make help` lists the targets.
SWIFT ?= swift
SHELL := /bin/bash
APT_PACKAGES := libsodium-dev libsqlite3-dev libpam0g-dev sqlite3

.PHONY: help deps build test clean

help:
	@echo "make deps    install the Debian packages Keyway builds against (apt-get; needs root)"
	@echo "make build   build everything (debug)"
	@echo "make test    install deps, build, and run every test"

# Installs only what is missing, so repeated runs stay fast and offline-friendly.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --parallel 2>&1 | tee .build/test-output.txt | grep -vE '^(◇|\[[0-9]+/[0-9]+\]|Test Case .* started)'; \
	status=$${PIPESTATUS[0]}; exit $$status

clean:
	$(SWIFT) package clean
