#[test]
fn probe() {
    for b in hfexport::backends() {
        eprintln!("{} runner: {:?}", b.format().as_str(), b.runner_available().map_err(|e| e.to_string()));
    }
}
