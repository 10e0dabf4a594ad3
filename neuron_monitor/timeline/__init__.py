"""Timeline tools: recording of reports, Trace Event Format conversion, failure detection."""
