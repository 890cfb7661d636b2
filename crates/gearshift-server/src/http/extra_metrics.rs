//! Metrics of parts that run beside the server in the same process (the
//! GearMonkey bridge): each registers a section once, and `GET /metrics`
//! appends every section after the server's own.

use std::sync::{Mutex, OnceLock};

/// Writes one section of Prometheus text (HELP, TYPE and samples).
pub type Section = Box<dyn Fn(&mut String) + Send + Sync>;

/// The registered sections, in registration order.
fn sections() -> &'static Mutex<Vec<Section>> {
    static SECTIONS: OnceLock<Mutex<Vec<Section>>> = OnceLock::new();
    SECTIONS.get_or_init(Mutex::default)
}

/// Adds a section to every later scrape of this process.
pub fn register(section: Section) {
    sections()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(section);
}

/// Appends every registered section to `out`.
pub fn append(out: &mut String) {
    for section in sections().lock().unwrap_or_else(|p| p.into_inner()).iter() {
        section(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_sections_follow_the_body() {
        register(Box::new(|out| out.push_str("extra_metric_for_test 1\n")));
        let mut body = String::from("own 1\n");
        append(&mut body);
        assert!(body.starts_with("own 1\n"));
        assert!(body.contains("extra_metric_for_test 1\n"));
    }
}
