// The /docs page: renders the OpenAPI document named by the page (data-openapi-url) with Swagger UI.
// Kept out of the HTML so the page needs no inline script under its Content-Security-Policy.
/* global SwaggerUIBundle */
(() => {
  const root = document.getElementById('swagger-ui');
  if (!root || typeof SwaggerUIBundle !== 'function') return;
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
    deepLinking: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    displayOperationId: true,
    displayRequestDuration: true,
    // No third-party validator badge, no configuration from the query string.
    validatorUrl: null,
    queryConfigEnabled: false,
    persistAuthorization: false,
  });
})();
