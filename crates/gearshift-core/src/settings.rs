//! A function's admin settings (paused, queue limits) live in the store
//! on a durable server: every change is written through, and a restart,
//! or a partition's new owner, restores them.

use bytes::Bytes;
use gearshift_persist::FunctionRecord;

use crate::effect::{Effect, StoreOp};
use crate::engine::Core;

impl Core {
    /// Writes function `name`'s settings as they now stand (its defaults
    /// once it is gone, which drops the stored record).
    pub(crate) fn store_settings(&mut self, name: &[u8]) {
        if !self.cfg.durable {
            return;
        }
        let f = self
            .table
            .func_named(name)
            .and_then(|id| self.table.func(id));
        let rec = FunctionRecord {
            name: Bytes::copy_from_slice(name),
            paused: f.is_some_and(|f| f.paused),
            max_queue: f.map_or([0; 3], |f| f.max_queue),
        };
        self.effects.push(Effect::Store(StoreOp::Function(rec)));
    }

    /// Restores stored settings after a restart: each function is created
    /// with them.
    pub fn restore_functions(&mut self, stored: Vec<FunctionRecord>) {
        for r in stored {
            let id = self.table.function_id(&r.name, &self.policies);
            if let Some(f) = self.table.func_mut(id) {
                f.paused = r.paused;
                f.max_queue = r.max_queue;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CoreConfig;

    fn stored(core: &mut Core) -> Vec<FunctionRecord> {
        core.take_effects()
            .into_iter()
            .filter_map(|e| match e {
                Effect::Store(StoreOp::Function(r)) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn rec(name: &str, paused: bool, max_queue: [i64; 3]) -> FunctionRecord {
        FunctionRecord {
            name: Bytes::copy_from_slice(name.as_bytes()),
            paused,
            max_queue,
        }
    }

    #[test]
    fn settings_are_written_through_and_restored() {
        let mut core = Core::new(CoreConfig {
            durable: true,
            ..CoreConfig::default()
        });
        core.set_paused(b"resize", true).expect("pause");
        core.set_max_queue(b"resize", [0, 10, 0]).expect("limits");
        core.set_paused(b"resize", false).expect("resume");
        assert_eq!(
            stored(&mut core),
            vec![
                rec("resize", true, [0, 0, 0]),
                rec("resize", true, [0, 10, 0]),
                rec("resize", false, [0, 10, 0]),
            ]
        );
        core.set_max_queue(b"resize", [0, 0, 0]).expect("limits");
        core.drop_function_named(b"resize").expect("drop");
        let last = stored(&mut core).pop();
        assert_eq!(
            last,
            Some(rec("resize", false, [0, 0, 0])),
            "dropped: defaults"
        );

        let mut again = Core::new(CoreConfig {
            durable: true,
            ..CoreConfig::default()
        });
        again.restore_functions(vec![rec("thumbs", true, [1, 2, 3])]);
        let f = again
            .functions_view()
            .into_iter()
            .find(|f| &f.name[..] == b"thumbs")
            .expect("restored function");
        assert!(f.paused);
        assert!(stored(&mut again).is_empty(), "restoring writes nothing");
    }

    #[test]
    fn a_server_without_a_store_writes_nothing() {
        let mut core = Core::new(CoreConfig::default());
        core.set_paused(b"f", true).expect("pause");
        assert!(stored(&mut core).is_empty());
    }
}
