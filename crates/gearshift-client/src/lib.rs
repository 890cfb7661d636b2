//! Async Gearman client and worker library for tokio, built on
//! `gearshift-proto`. Empty for now: the library and the `submit`/`work`/
//! `admin` subcommands built on it are the next piece of work.
