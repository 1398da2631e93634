// placeholder: replaced by the real handler
export const handler = async (): Promise<void> => {}
