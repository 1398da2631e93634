// Imported first by the bench's entry points. Lambda runs Node 22; the AWS SDK's notice about Node 20
// would only clutter the bench's output (vitest.config.ts silences it for the tests the same way).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'
