import { setLogSink } from '../../lib/log.js'

// Test runs log at debug level so captureLogs() sees everything; the terminal sees it only on request.
if (process.env.ACTIONS_TEST_LOGS !== '1') setLogSink(() => {})
