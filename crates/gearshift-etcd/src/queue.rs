//! The jobs the bridge may claim, as the watch last saw them, per
//! function lowest id first, and how many each function may have in
//! Gearshift at once (its free Gearman workers). No I/O: the watch offers
//! and removes, the supervisor sets capacities, the claimer takes.

use std::collections::{BTreeMap, HashMap};

use crate::doc::JobDoc;

/// A `QUEUED` job as read.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its id.
    pub id: String,
    /// Its key.
    pub key: String,
    /// Its mod_revision when read (the claim compares it).
    pub mod_rev: i64,
    /// The document.
    pub doc: JobDoc,
}

/// What the watch said of a held job while it was held.
#[derive(Debug, Default)]
enum Later {
    /// Nothing.
    #[default]
    Nothing,
    /// `QUEUED` again (its own retry's `QUEUED`, or a harvest): offered
    /// again when it ends.
    Offer(String, Candidate),
    /// Changed otherwise, or gone.
    Removed,
}

/// The claimable jobs and the per-function gates.
#[derive(Debug, Default)]
pub struct Queue {
    waiting: HashMap<String, BTreeMap<String, Candidate>>,
    function_of: HashMap<String, String>,
    /// Jobs this bridge runs, with what the watch said meanwhile.
    held: HashMap<String, Later>,
    capacity: HashMap<String, usize>,
    inflight: HashMap<String, usize>,
}

impl Queue {
    /// A job is `QUEUED` (new, or changed).
    pub fn offer(&mut self, function: String, c: Candidate) {
        if let Some(later) = self.held.get_mut(&c.id) {
            *later = Later::Offer(function, c);
            return;
        }
        self.remove(&c.id);
        self.function_of.insert(c.id.clone(), function.clone());
        self.waiting
            .entry(function)
            .or_default()
            .insert(c.id.clone(), c);
    }

    /// A job is no longer claimable (claimed elsewhere, finished, gone).
    pub fn remove(&mut self, id: &str) {
        if let Some(later) = self.held.get_mut(id) {
            *later = Later::Removed;
        }
        if let Some(f) = self.function_of.remove(id) {
            if let Some(w) = self.waiting.get_mut(&f) {
                w.remove(id);
                if w.is_empty() {
                    self.waiting.remove(&f);
                }
            }
        }
    }

    /// Forgets every waiting job (before the range is read afresh).
    pub fn clear(&mut self) {
        self.waiting.clear();
        self.function_of.clear();
        for later in self.held.values_mut() {
            *later = Later::Removed;
        }
    }

    /// Sets each function's capacity (absent: none).
    pub fn set_capacity(&mut self, capacity: HashMap<String, usize>) {
        self.capacity = capacity;
    }

    /// Jobs in flight per function.
    pub fn inflight(&self) -> HashMap<String, usize> {
        self.inflight.clone()
    }

    /// Functions with waiting jobs.
    pub fn functions(&self) -> impl Iterator<Item = &String> {
        self.waiting.keys()
    }

    /// The jobs to claim now: per function, lowest ids first, while it is
    /// under its capacity. Each is held until [`Queue::done`] (or
    /// [`Queue::release`] and [`Queue::unhold`]).
    pub fn take(&mut self) -> Vec<(String, Candidate)> {
        let mut out = Vec::new();
        let functions: Vec<String> = self.waiting.keys().cloned().collect();
        for f in functions {
            let cap = self.capacity.get(&f).copied().unwrap_or(0);
            loop {
                let busy = self.inflight.get(&f).copied().unwrap_or(0);
                if busy >= cap {
                    break;
                }
                let Some(w) = self.waiting.get_mut(&f) else {
                    break;
                };
                let Some((_, c)) = w.pop_first() else { break };
                if w.is_empty() {
                    self.waiting.remove(&f);
                }
                self.function_of.remove(&c.id);
                *self.inflight.entry(f.clone()).or_default() += 1;
                self.held.insert(c.id.clone(), Later::Nothing);
                out.push((f.clone(), c));
            }
        }
        out
    }

    /// A taken job no longer uses a Gearman worker of `function` (its run
    /// ended, or its claim was lost): one more may be claimed.
    pub fn release(&mut self, function: &str) {
        if let Some(n) = self.inflight.get_mut(function) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.inflight.remove(function);
            }
        }
    }

    /// A taken job is written back (or given up): an offer seen while it
    /// was held is made again.
    pub fn unhold(&mut self, id: &str) {
        if let Some(Later::Offer(f, c)) = self.held.remove(id) {
            self.offer(f, c);
        }
    }

    /// Whether this bridge holds the job (it is between take and unhold).
    pub fn is_held(&self, id: &str) -> bool {
        self.held.contains_key(id)
    }

    /// Whether any job is between take and unhold (a claim or a run in
    /// flight).
    pub fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// A held job whose claim failed for want of an answer: offered again
    /// when it is unheld, unless the watch has said something newer.
    pub fn retry(&mut self, function: String, c: Candidate) {
        if let Some(later @ Later::Nothing) = self.held.get_mut(&c.id) {
            *later = Later::Offer(function, c);
        }
    }

    /// [`Queue::release`] and [`Queue::unhold`] together.
    pub fn done(&mut self, function: &str, id: &str) {
        self.release(function);
        self.unhold(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: &str, rev: i64) -> Candidate {
        let doc = JobDoc::parse(br#"{"States":[{"State":"QUEUED","Step":"","Date":""}]}"#)
            .expect("valid");
        Candidate {
            id: id.into(),
            key: format!("/jobs/{id}"),
            mod_rev: rev,
            doc,
        }
    }

    #[test]
    fn takes_lowest_first_only_while_workers_are_free() {
        let mut q = Queue::default();
        q.offer("f".into(), cand("3", 1));
        q.offer("f".into(), cand("1", 1));
        q.offer("f".into(), cand("2", 1));
        q.offer("g".into(), cand("9", 1));
        assert!(q.take().is_empty(), "no worker, no claim");
        q.set_capacity(HashMap::from([("f".into(), 2)]));
        let ids: Vec<String> = q.take().into_iter().map(|(_, c)| c.id).collect();
        assert_eq!(ids, ["1", "2"]);
        assert!(q.take().is_empty(), "both workers busy");
        q.done("f", "1");
        let ids: Vec<String> = q.take().into_iter().map(|(_, c)| c.id).collect();
        assert_eq!(ids, ["3"]);
        assert_eq!(q.inflight().get("f"), Some(&2));
        assert_eq!(q.functions().collect::<Vec<_>>(), ["g"]);
    }

    #[test]
    fn an_offer_for_a_held_job_waits_until_it_ends() {
        let mut q = Queue::default();
        q.set_capacity(HashMap::from([("f".into(), 1)]));
        q.offer("f".into(), cand("1", 1));
        assert_eq!(q.take().len(), 1);
        q.offer("f".into(), cand("1", 5));
        assert_eq!(q.functions().count(), 0, "held: not offered twice");
        assert!(q.is_held("1") && !q.is_held("2"));
        q.done("f", "1");
        let again = q.take();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].1.mod_rev, 5);
        q.release("f");
        assert!(q.take().is_empty(), "released, but 1 is still held");
        q.offer("f".into(), cand("1", 9));
        q.unhold("1");
        assert_eq!(q.take()[0].1.mod_rev, 9, "the offer made while held");
        q.release("f");
        q.retry("f".into(), cand("1", 9));
        q.unhold("1");
        assert_eq!(q.take().len(), 1, "a failed claim is tried again");
        q.remove("1");
        q.retry("f".into(), cand("1", 9));
        q.done("f", "1");
        assert!(q.take().is_empty(), "not after the watch removed it");
        q.offer("f".into(), cand("2", 1));
        q.remove("2");
        assert!(q.take().is_empty());
    }
}
