//! Reading the client's metrics (the process-wide Prometheus recorder): the limits it
//! sampled during a run.

use std::collections::BTreeMap;

pub type Handle = metrics_exporter_prometheus::PrometheusHandle;

/// `tmas_endpoint_concurrency_limit` by endpoint.
pub fn limits(h: &Handle) -> BTreeMap<String, f64> {
    gauge(&h.render(), "tmas_endpoint_concurrency_limit")
}

/// The values of a gauge with an `endpoint` label in Prometheus text format.
pub fn gauge(text: &str, name: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let Some(ep) = labels
            .split(',')
            .find_map(|l| l.trim().strip_prefix("endpoint=\""))
            .and_then(|v| v.strip_suffix('"'))
        else {
            continue;
        };
        if let Ok(v) = value.trim().parse::<f64>() {
            out.insert(ep.to_string(), v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_a_labelled_gauge() {
        let text = "# TYPE tmas_endpoint_concurrency_limit gauge\n\
            tmas_endpoint_concurrency_limit{endpoint=\"sim-a\"} 137\n\
            tmas_endpoint_concurrency_limit_other{endpoint=\"x\"} 1\n\
            tmas_endpoint_concurrency_limit{endpoint=\"sim-b\"} 92.5\n";
        let g = super::gauge(text, "tmas_endpoint_concurrency_limit");
        assert_eq!(g.len(), 2);
        assert_eq!(g["sim-a"], 137.0);
        assert_eq!(g["sim-b"], 92.5);
    }
}
